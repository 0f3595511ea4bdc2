// One sparse-attention problem for the GPU tests: a step of two requests
// (a decode row and a two-row chunk) plus a padding row over a paged bf16 or
// fp8 main cache with one unmapped page, token-index rows mixing attended
// ids with -1, ids past seq_len, ids below -1 and ids on the unmapped page,
// and the reference's attention and gate outputs for it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "reference/attention.hpp"
#include "reference/core/config.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/gate.hpp"
#include "reference/kv_cache.hpp"

namespace qsa::gpu_test {

struct AttnSpec {
  int dim = 64;
  int kv_heads = 2;
  int group = 4;  // H / G
  int ids = 37;   // counted columns per row
  bool count = false;
  PrecisionProfile profile = PrecisionProfile::kEngine;
  KvDtype kv = KvDtype::kBf16;
  Fp8Flavor flavor = Fp8Flavor::kE4m3fn;
  bool round_logits = false;  // knobs on top of the profile
  bool round_sigmoid = false;
};

inline std::string spec_name(const AttnSpec& s) {
  std::string n = "D" + std::to_string(s.dim) + "_G" + std::to_string(s.kv_heads) + "_HG" + std::to_string(s.group) +
                  "_ids" + std::to_string(s.ids) + (s.count ? "_count" : "") + "_" +
                  (s.profile == PrecisionProfile::kEngine ? "engine" : "exact");
  if (s.kv == KvDtype::kFp8) n += s.flavor == Fp8Flavor::kE4m3fnuz ? "_fp8fnuz" : "_fp8fn";
  if (s.round_logits) n += "_rlogits";
  if (s.round_sigmoid) n += "_rsigmoid";
  return n;
}

// gtest prints parameters with this (instead of their bytes).
inline void PrintTo(const AttnSpec& s, std::ostream* os) { *os << spec_name(s); }

// Seeds are fixed per case and overridable with QSA_TEST_SEED.
inline uint64_t case_seed(const std::string& name) {
  uint64_t base = 0x5a77e57ULL;
  if (const char* env = std::getenv("QSA_TEST_SEED")) base = std::strtoull(env, nullptr, 0);
  return base ^ stream_id(name);
}

struct AttnCase {
  AttnSpec spec;
  QsaConfig config;
  AttentionParams params;
  GateParams gate_params;
  KvCacheParams kv_params;
  StepLayout layout;
  MainKvCache cache;
  TensorD q, gate;  // [T, H, D], bf16 values
  TensorI32 token_idx;
  TensorD ref_attn, ref_gated;
};

inline QsaConfig case_config(const AttnSpec& s) {
  QsaConfig c = config_preset("tiny");
  c.num_kv_heads = s.kv_heads;
  c.num_heads = s.kv_heads * s.group;
  c.head_dim = s.dim;
  c.page_size = 64;
  c.count_column = s.count;
  apply_profile(c, s.profile);
  c.precision.round_logits_bf16 = s.round_logits;
  c.precision.round_sigmoid_bf16 = s.round_sigmoid;
  c.kv_dtype = s.kv;
  c.fp8_flavor = s.flavor;
  c.k_scale = 0.5;
  c.v_scale = 0.25;
  return c;
}

// Ids of one row: ~70% attended, the rest -1, past seq_len, below -1 or (for
// request 0) on its unmapped page 1; row `all_invalid` attends nothing.
inline void fill_ids(const CounterRng& rng, int64_t row, int64_t L, bool unmapped, bool all_invalid, int n,
                     int32_t* ids) {
  for (int c = 0; c < n; ++c) {
    const uint64_t i = static_cast<uint64_t>(row) * 100000 + static_cast<uint64_t>(c);
    const uint64_t kind = rng.bits(2 * i) % 100;
    const int64_t u = static_cast<int64_t>(rng.bits(2 * i + 1) >> 1);
    int64_t id = u % L;
    if (all_invalid) id = kind < 50 ? -1 : L + u % 100;
    else if (kind < 10) id = -1;
    else if (kind < 18) id = L + u % 100;
    else if (kind < 22) id = -2 - u % 8;
    else if (kind < 30 && unmapped) id = 64 + u % 64;
    ids[c] = static_cast<int32_t>(id);
  }
}

inline AttnCase make_attn_case(const AttnSpec& s, uint64_t seed) {
  const QsaConfig c = case_config(s);
  const int32_t ctx0 = s.ids + 150, ctx1 = std::max(s.ids / 2, 8) + 20;
  const int32_t pages_per_req = (std::max(ctx0 + 1, ctx1 + 2) + c.page_size - 1) / c.page_size;
  const int64_t num_pages = 2 * int64_t{pages_per_req};
  StepMetadata meta = simple_step({ctx0, ctx1}, {1, 2}, pages_per_req, /*padding_rows=*/1);
  meta.ring_blocks = {0, 1};
  const StepLayout full = derive_step_layout(c, {num_pages, num_pages}, meta);
  MainKvCache cache(make_kv_cache_params(c, num_pages));
  const int64_t GD = int64_t{c.num_kv_heads} * c.head_dim;
  const CounterRng rk(seed, "gpu.attention.k"), rv(seed, "gpu.attention.v");
  std::vector<double> k(static_cast<size_t>(GD)), v(k.size());
  for (int i = 0; i < full.num_reqs; ++i)
    for (int64_t t = 0; t < full.seq_lens[i]; ++t) {
      const int64_t slot = paged_slot(full.block_table, i, t, c.page_size);
      for (int64_t j = 0; j < GD; ++j) {
        const uint64_t at = static_cast<uint64_t>(slot * GD + j);
        // bf16 values, so that a bf16 cache stores them exactly in every profile.
        k[j] = s.kv == KvDtype::kBf16 ? round_bf16(rk.normal(at)) : rk.normal(at);
        v[j] = s.kv == KvDtype::kBf16 ? round_bf16(rv.normal(at)) : rv.normal(at);
      }
      cache.write(slot, t, k.data(), v.data());
    }
  meta.block_table.at(0, 1) = -1;  // request 0 loses page 1 (tokens 64..127) after the writes
  StepLayout layout = derive_step_layout(c, {num_pages, num_pages}, meta);

  AttentionParams p = make_attention_params(c);
  p.index_width = s.ids + (s.count ? 1 : 0);
  const int64_t T = layout.num_tokens;
  TensorD q({T, c.num_heads, c.head_dim}), gate(q.shape);
  const CounterRng rq(seed, "gpu.attention.q"), rg(seed, "gpu.attention.gate"), ri(seed, "gpu.attention.ids");
  for (int64_t i = 0; i < q.numel(); ++i) {
    q.data[i] = round_bf16(rq.normal(static_cast<uint64_t>(i)));
    gate.data[i] = round_bf16(rg.normal(static_cast<uint64_t>(i)));
  }
  TensorI32 idx({T, p.index_width}, -1);
  for (int64_t row = 0; row < T; ++row) {
    const int req = layout.token_to_req[row];
    const int64_t L = req >= 0 ? layout.seq_lens[req] : 16;  // padding rows get junk ids too
    fill_ids(ri, row, L, req == 0, /*all_invalid=*/row == 2, s.ids, idx.row(row));
    if (s.count)  // a random bound; the columns past it hold ids that must be ignored
      idx.at(row, s.ids) = static_cast<int32_t>(ri.bits(static_cast<uint64_t>(1) << 40 | static_cast<uint64_t>(row)) %
                                                static_cast<uint64_t>(s.ids + 1));
  }
  if (s.count && s.ids > 1) idx.at(0, s.ids) = s.ids;  // the decode row counts every column

  TensorD ref_attn, ref_gated;
  sparse_attention(p, q, idx, layout, cache, ref_attn);
  const GateParams gp = make_gate_params(c);
  apply_gate(gp, ref_attn, gate, ref_gated);
  return {s, c, p, gp, make_kv_cache_params(c, num_pages), layout, cache, q, gate, idx, ref_attn, ref_gated};
}

}  // namespace qsa::gpu_test
