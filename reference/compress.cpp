#include "reference/compress.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/parallel.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rope.hpp"

namespace qsa {

double quantize_indexer(const CompressParams& p, double x) {
  if (p.dtype == IndexerDtype::kFp8) return round_fp8(x, p.fp8_flavor);
  return p.round_storage ? round_bf16(x) : x;
}

CompressedRows compress_completed_groups(const CompressParams& p, const RmsNormParams& norm,
                                         const RopeParams& rope, const TensorD& k_norm,
                                         const StepLayout& l, const TensorD& raw_keys,
                                         const RawKeyRing& ring, CompressedCache& cache) {
  require_shape(raw_keys, {l.num_tokens, p.dim}, "raw keys");
  require_shape(k_norm, {p.dim}, "indexer k_norm weight");
  CompressedRows out;
  for (int64_t t = 0; t < l.num_tokens; ++t) {
    if (l.compressed_slot[t] < 0) continue;
    out.token.push_back(static_cast<int32_t>(t));
    out.block.push_back(l.pos[t] / p.ratio);
    out.slot.push_back(l.compressed_slot[t]);
  }
  const int64_t n = static_cast<int64_t>(out.token.size());
  out.keys = TensorD({n, p.dim});

  // Rows are independent: each reads members and writes its own slot.
  parallel_for(n, [&](int64_t i) {
    const int64_t t = out.token[i];
    const int req = l.token_to_req[t];
    const int64_t ctx = l.context_len(req);
    const int64_t first = out.block[i] * p.ratio;
    std::vector<double> pooled(p.dim, 0.0);
    int64_t rope3[3] = {0, 0, 0};
    for (int m = 0; m < p.ratio; ++m) {
      const int64_t q = first + m;
      int64_t member_rope[3];
      const double* key;
      if (q >= ctx) {
        const int64_t row = l.row_begin(req) + (q - ctx);
        key = raw_keys.row(row);
        for (int a = 0; a < 3; ++a) member_rope[a] = l.rope_pos.at(a, row);
      } else {
        key = ring.read(l.ring_blocks[req], q, member_rope);
      }
      if (m == 0) std::copy(member_rope, member_rope + 3, rope3);
      for (int d = 0; d < p.dim; ++d) pooled[d] += key[d];
    }
    for (double& x : pooled) x /= p.ratio;
    if (p.round_storage)
      for (double& x : pooled) x = round_bf16(x);
    double* key = out.keys.row(i);
    gemma_rms_norm_row(norm, pooled.data(), k_norm.ptr(), key);
    rope_row(rope, rope3, key);
    for (int d = 0; d < p.dim; ++d) key[d] = quantize_indexer(p, key[d]);
  });
  // Writes after all reads; distinct slots were checked by the layout.
  for (int64_t i = 0; i < n; ++i) cache.write(out.slot[i], out.block[i], out.keys.row(i));
  return out;
}

void overwrite_compressed_rows(const StageRecord& rec, CompressedCache& cache) {
  const int64_t n = rec.comp_keys.empty() ? 0 : rec.comp_keys.dim(0);
  if (rec.comp_slots.numel() != n || rec.comp_blocks.numel() != n)
    throw InputError(fmt::format("recorded compressed rows: {} keys but {} slots and {} block ids", n,
                                 rec.comp_slots.numel(), rec.comp_blocks.numel()));
  require_shape(rec.comp_keys, {n, cache.dim()}, "recorded comp_keys");
  for (int64_t i = 0; i < n; ++i) cache.write(rec.comp_slots.at(i), rec.comp_blocks.at(i), rec.comp_keys.row(i));
}

void write_ring(const StepLayout& l, const TensorD& raw_keys, RawKeyRing& ring) {
  for (int64_t t = 0; t < l.num_tokens; ++t) {
    if (l.ring_slot[t] < 0) continue;
    const int64_t rope3[3] = {l.rope_pos.at(0, t), l.rope_pos.at(1, t), l.rope_pos.at(2, t)};
    ring.write(l.ring_slot[t], l.pos[t], rope3, raw_keys.row(t));
  }
}

TensorD gather_compressed_keys(const StepLayout& l, int req, int64_t n_blocks, const CompressedCache& cache) {
  TensorD kc({n_blocks, cache.dim()});
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t slot = paged_slot(l.block_table_c, req, b, cache.rows_per_page());
    if (slot < 0)
      throw InputError(fmt::format("compressed block {} of request {} is visible but its page {} is "
                                   "unmapped in block_table_c",
                                   b, req, b / cache.rows_per_page()));
    if (cache.block_at(slot) != b)
      throw InputError(fmt::format("compressed row {} should hold block {} of request {} but {}: missing "
                                   "earlier steps or initial cache state?",
                                   slot, b, req,
                                   cache.block_at(slot) < 0 ? std::string("was never written")
                                                            : fmt::format("holds {} (a stale block)", cache.block_at(slot))));
    std::copy(cache.row(slot), cache.row(slot) + cache.dim(), kc.row(b));
  }
  return kc;
}

}  // namespace qsa
