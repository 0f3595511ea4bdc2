#include "gpu/prepare/prepare_params.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "reference/core/errors.hpp"

namespace qsa::gpu {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw ConfigError("gpu prepare: " + msg); }

void check_norm(const RmsNormParams& n, int dim, const char* name) {
  if (n.dim != dim)
    fail(fmt::format("{} normalises rows of {} values but its heads have {}", name, n.dim, dim));
  if (!(n.eps >= 0.0) || !std::isfinite(n.eps)) fail(fmt::format("{} eps = {} must be finite and >= 0", name, n.eps));
}

void check_rope(const RopeParams& r, int dim, const char* name) {
  if (r.head_dim != dim) fail(fmt::format("{} is for heads of {} values, the kernel's have {}", name, r.head_dim, dim));
  if (r.rotary_dim <= 0 || r.rotary_dim % 2 != 0 || r.rotary_dim > dim)
    fail(fmt::format("{} rotary_dim = {} must be positive, even and at most the head dim {}", name, r.rotary_dim, dim));
  if (r.rotary_dim / 2 > kPrepareMaxRopePairs)
    fail(fmt::format("{} rotary_dim = {} exceeds the kernel's {} frequency pairs", name, r.rotary_dim,
                     kPrepareMaxRopePairs));
  if (!(r.theta > 0.0) || !std::isfinite(r.theta)) fail(fmt::format("{} theta = {} must be positive and finite", name, r.theta));
  const auto& s = r.mrope_section;
  const int sum = s[0] + s[1] + s[2];
  if (s[0] < 0 || s[1] < 0 || s[2] < 0 || (sum != 0 && sum != r.rotary_dim / 2))
    fail(fmt::format("{} mrope_section [{}, {}, {}] must be non-negative and sum to rotary_dim / 2 = {} (or be all "
                     "zero)",
                     name, s[0], s[1], s[2], r.rotary_dim / 2));
}

}  // namespace

PrepareParams make_prepare_params(const QsaConfig& c, int64_t num_pages) {
  validate_config(c);
  PrepareParams p;
  p.indexer_heads = c.indexer_heads;
  p.indexer_dim = c.indexer_head_dim;
  p.heads = c.num_heads;
  p.kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.norm_index_q = make_rms_norm_params(c, 0, c.indexer_head_dim);
  p.norm_index_k = make_rms_norm_params(c, 0, c.indexer_head_dim);
  p.norm_q = make_rms_norm_params(c, 0, c.head_dim);
  p.norm_k = make_rms_norm_params(c, 0, c.head_dim);
  p.rope_index = make_rope_params(c, c.indexer_heads, c.indexer_head_dim);
  p.rope_main = make_rope_params(c, c.num_heads, c.head_dim);
  p.compress = make_compress_params(c);
  p.kv = make_kv_cache_params(c, num_pages);
  return p;
}

void check_prepare_params(const PrepareParams& p) {
  if (p.indexer_heads < 1 || p.indexer_dim < 1 || p.heads < 1 || p.kv_heads < 1 || p.head_dim < 1)
    fail(fmt::format("H_I = {}, d_I = {}, H = {}, G = {} and D = {} must all be positive", p.indexer_heads,
                     p.indexer_dim, p.heads, p.kv_heads, p.head_dim));
  if (p.indexer_dim > kPrepareMaxHeadDim || p.head_dim > kPrepareMaxHeadDim)
    fail(fmt::format("head dims d_I = {} and D = {} must be at most {} (a head row lives in a lane group's registers)",
                     p.indexer_dim, p.head_dim, kPrepareMaxHeadDim));
  check_norm(p.norm_index_q, p.indexer_dim, "norm_index_q");
  check_norm(p.norm_index_k, p.indexer_dim, "norm_index_k");
  check_norm(p.norm_q, p.head_dim, "norm_q");
  check_norm(p.norm_k, p.head_dim, "norm_k");
  check_rope(p.rope_index, p.indexer_dim, "rope_index");
  check_rope(p.rope_main, p.head_dim, "rope_main");

  const CompressParams& cp = p.compress;
  if (cp.ratio < 1) fail(fmt::format("compress ratio r = {} must be at least 1", cp.ratio));
  if (cp.dim != p.indexer_dim) fail(fmt::format("compress dim = {} differs from d_I = {}", cp.dim, p.indexer_dim));
  if (cp.ring_capacity < cp.ratio)
    fail(fmt::format("ring capacity C = {} cannot hold a group of r = {} raw keys", cp.ring_capacity, cp.ratio));
  if (cp.rows_per_page < 1) fail(fmt::format("compressed rows per page = {} must be positive", cp.rows_per_page));

  const KvCacheParams& kv = p.kv;
  if (kv.dtype != KvDtype::kBf16 && kv.dtype != KvDtype::kFp8)
    fail(fmt::format("main KV dtype {} is not implemented (bf16 and fp8 are)", to_string(kv.dtype)));
  if (kv.kv_heads != p.kv_heads || kv.head_dim != p.head_dim)
    fail(fmt::format("the KV cache has {} heads of {} values, the kernel writes {} of {}", kv.kv_heads, kv.head_dim,
                     p.kv_heads, p.head_dim));
  if (kv.page_size < 1 || kv.num_pages < 1)
    fail(fmt::format("the KV cache needs pages (page_size = {}, num_pages = {})", kv.page_size, kv.num_pages));
  if (kv.dtype == KvDtype::kFp8 &&
      (!(kv.k_scale > 0.0) || !std::isfinite(kv.k_scale) || !(kv.v_scale > 0.0) || !std::isfinite(kv.v_scale)))
    fail(fmt::format("fp8 KV scales k_scale = {}, v_scale = {} must be positive and finite", kv.k_scale, kv.v_scale));
}

}  // namespace qsa::gpu
