#include "harness/sweep/sweep_kv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "reference/core/errors.hpp"
#include "reference/parallel.hpp"

namespace qsa {

namespace {

// Tokens per codec: each chunk runs its own one-slot cache, so the codec is
// exactly MainKvCache::write and chunks can run in parallel.
constexpr int64_t kQuantizeChunk = 256;

}  // namespace

ContextKv gather_context(const MainKvCache& cache, const StepLayout& layout, int req, int64_t n) {
  const KvCacheParams& p = cache.params();
  ContextKv ctx;
  ctx.tokens = n;
  ctx.width = p.kv_heads * p.head_dim;
  const size_t w = static_cast<size_t>(ctx.width);
  ctx.k.resize(static_cast<size_t>(n) * w);
  ctx.v.resize(static_cast<size_t>(n) * w);
  parallel_for(n, [&](int64_t t) {
    const int64_t slot = paged_slot(layout.block_table, req, t, p.page_size);
    if (slot < 0 || slot >= cache.num_slots())
      throw InputError(
          fmt::format("token {} of request {} is on an unmapped page: a sweep needs the whole context "
                      "of every scored row for dense attention",
                      t, req));
    if (cache.position_at(slot) != t)
      throw InputError(
          fmt::format("main KV slot {} should hold token {} of request {} but holds position {}: a "
                      "sweep needs the whole context of every scored row",
                      slot, t, req, cache.position_at(slot)));
    std::memcpy(&ctx.k[static_cast<size_t>(t) * w], cache.k(slot, 0), w * sizeof(double));
    std::memcpy(&ctx.v[static_cast<size_t>(t) * w], cache.v(slot, 0), w * sizeof(double));
  });
  return ctx;
}

KvCacheParams sweep_kv_params(const QsaConfig& c, KvDtype dtype, int octave_window, int octave_sinks) {
  KvCacheParams p;
  p.dtype = dtype;
  p.kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.page_size = 1;
  p.num_pages = 1;
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.fp8_flavor = c.fp8_flavor;
  p.round_storage = true;  // the cache an engine keeps; exact is the baseline
  p.octave_window = octave_window >= 0 ? octave_window : c.octave_window;
  p.octave_sinks = octave_sinks >= 0 ? octave_sinks : c.octave_sinks;
  return p;
}

void quantize_context(const std::vector<KvCacheParams>& dtypes, int64_t seq_len, ContextKv& ctx) {
  const size_t w = static_cast<size_t>(ctx.width);
  const int64_t chunks = (ctx.tokens + kQuantizeChunk - 1) / kQuantizeChunk;
  for (const KvCacheParams& p : dtypes) {
    std::vector<double> kq(ctx.k.size()), vq(ctx.v.size());
    const bool octave = p.dtype != KvDtype::kBf16 && p.dtype != KvDtype::kFp8;
    parallel_for(chunks, [&](int64_t chunk) {
      MainKvCache codec(p);
      const int64_t end = std::min(ctx.tokens, (chunk + 1) * kQuantizeChunk);
      for (int64_t t = chunk * kQuantizeChunk; t < end; ++t) {
        const size_t at = static_cast<size_t>(t) * w;
        codec.write(0, t, &ctx.k[at], &ctx.v[at]);
        // Attention's rule for Octave's ideal window and sink tables.
        const bool exact = octave && (t < p.octave_sinks || t >= seq_len - p.octave_window);
        std::memcpy(&kq[at], exact ? codec.k_exact(0, 0) : codec.k(0, 0), w * sizeof(double));
        std::memcpy(&vq[at], exact ? codec.v_exact(0, 0) : codec.v(0, 0), w * sizeof(double));
      }
    });
    ctx.kq.push_back(std::move(kq));
    ctx.vq.push_back(std::move(vq));
  }
}

}  // namespace qsa
