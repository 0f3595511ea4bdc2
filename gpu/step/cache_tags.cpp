#include "gpu/step/cache_tags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "reference/core/errors.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

namespace {

size_t slots(int64_t pages, int64_t per_page) { return static_cast<size_t>(pages * per_page); }

std::string held_what(int64_t held) {
  return held < 0 ? std::string("was never written") : fmt::format("holds {}", held);
}

}  // namespace

CacheTags::CacheTags(const CacheGeometry& g, int page, int r, int ring_capacity)
    : kv(slots(g.num_pages, page), -1),
      ring(slots(g.num_ring_blocks, ring_capacity), -1),
      compressed(slots(g.num_pages, page / r), -1),
      page_size(page),
      rows_per_page(page / r),
      ratio(r) {}

void CacheTags::record_step(const StepLayout& l) {
  for (int64_t t = 0; t < l.num_valid_tokens; ++t) {
    const auto i = static_cast<size_t>(t);
    if (l.main_slot[i] >= 0) kv[static_cast<size_t>(l.main_slot[i])] = l.pos[i];
    if (l.compressed_slot[i] >= 0) compressed[static_cast<size_t>(l.compressed_slot[i])] = l.pos[i] / ratio;
    if (l.ring_slot[i] >= 0) ring[static_cast<size_t>(l.ring_slot[i])] = l.pos[i];
  }
}

void CacheTags::check_selection_reads(const StepLayout& l) const {
  for (int req = 0; req < l.num_reqs; ++req) {
    int32_t n_blocks = 0;
    for (int64_t t = l.row_begin(req); t < l.row_end(req); ++t)
      n_blocks = std::max(n_blocks, l.visible_blocks[static_cast<size_t>(t)]);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t slot = paged_slot(l.block_table_c, req, b, rows_per_page);
      if (slot < 0)
        throw InputError(fmt::format("compressed block {} of request {} is visible but its page {} is unmapped in "
                                     "block_table_c",
                                     b, req, b / rows_per_page));
      const int64_t held = compressed[static_cast<size_t>(slot)];
      if (held != b)
        throw InputError(fmt::format("compressed row {} should hold block {} of request {} but {}: missing earlier "
                                     "steps or initial cache state?",
                                     slot, b, req, held < 0 ? held_what(held) : fmt::format("holds block {}", held)));
    }
  }
}

void CacheTags::check_attention_reads(const StepLayout& l, const TensorI32& token_idx, bool count_column) const {
  const int64_t width = token_idx.dim(1);
  for (int64_t row = 0; row < l.num_tokens; ++row) {
    const int req = l.token_to_req[static_cast<size_t>(row)];
    if (req < 0) continue;
    const int32_t* ids = token_idx.row(row);
    const int64_t n = attended_columns(ids, width, count_column);
    const int64_t L = l.seq_lens[static_cast<size_t>(req)];
    for (int64_t c = 0; c < n; ++c) {
      const int32_t t = ids[c];
      if (t < 0 || t >= L) continue;
      const int64_t slot = paged_slot(l.block_table, req, t, page_size);
      if (slot < 0) continue;
      if (slot >= static_cast<int64_t>(kv.size()))
        throw InputError(fmt::format("token id {} of request {} (row {}) maps to main KV slot {}, past the cache's "
                                     "{} slots",
                                     t, req, row, slot, kv.size()));
      const int64_t held = kv[static_cast<size_t>(slot)];
      if (held != t)
        throw InputError(fmt::format("main KV slot {} for token id {} of request {} (row {}) holds position {}: {}; "
                                     "the trace reads a token the cache does not hold",
                                     slot, t, req, row, held,
                                     held < 0 ? "it was never written" : "it was overwritten by another token"));
    }
  }
}

}  // namespace qsa::gpu
