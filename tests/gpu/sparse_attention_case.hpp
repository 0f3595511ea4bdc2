// One sparse-attention problem for the GPU tests: a step of two requests
// (a decode row and a two-row chunk) plus a padding row over a paged bf16 or
// fp8 main cache with one unmapped page, token-index rows mixing attended
// ids with -1, ids past seq_len, ids below -1 and ids on the unmapped page,
// and the reference's attention and gate outputs for it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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
#include "reference/expand.hpp"
#include "reference/gate.hpp"
#include "reference/kv_cache.hpp"
#include "reference/select.hpp"

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
  bool one_row = false;  // request 0's decode row alone (the tensor-core kernel's most splits)
  // When nonzero, head h's Q times 2^(q_exponent + h % 3), and the softmax
  // scale times 2^-q_exponent, so the logits stay as sharp as usual: 17
  // puts Q past f16's largest value, -24 below f16's normals (the fp8
  // tensor-core path holds Q in f16, scaled per head row; h % 3 catches a
  // row given another row's scale).
  int q_exponent = 0;
};

inline std::string spec_name(const AttnSpec& s) {
  std::string n = "D" + std::to_string(s.dim) + "_G" + std::to_string(s.kv_heads) + "_HG" + std::to_string(s.group) +
                  "_ids" + std::to_string(s.ids) + (s.count ? "_count" : "") + "_" +
                  (s.profile == PrecisionProfile::kEngine ? "engine" : "exact");
  if (s.kv == KvDtype::kFp8) n += s.flavor == Fp8Flavor::kE4m3fnuz ? "_fp8fnuz" : "_fp8fn";
  if (s.round_logits) n += "_rlogits";
  if (s.round_sigmoid) n += "_rsigmoid";
  if (s.one_row) n += "_1row";
  if (s.q_exponent != 0) n += "_q2e" + std::string(s.q_exponent < 0 ? "m" : "") + std::to_string(std::abs(s.q_exponent));
  return n;
}

// gtest prints parameters with this (instead of their bytes).
inline void PrintTo(const AttnSpec& s, std::ostream* os) { *os << spec_name(s); }
// ... and names the instances of a suite over AttnSpec with this.
inline std::string param_name(const testing::TestParamInfo<AttnSpec>& info) { return spec_name(info.param); }

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

// A cache of num_pages pages of config c with random K and V at every token
// of `full` (every page still mapped), drawn per cache slot.
inline MainKvCache random_kv_cache(const QsaConfig& c, const StepLayout& full, int64_t num_pages, KvDtype kv,
                                   uint64_t seed) {
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
        k[j] = kv == KvDtype::kBf16 ? round_bf16(rk.normal(at)) : rk.normal(at);
        v[j] = kv == KvDtype::kBf16 ? round_bf16(rv.normal(at)) : rv.normal(at);
      }
      cache.write(slot, t, k.data(), v.data());
    }
  return cache;
}

// The case of spec s built from config c (case_config(s), possibly edited:
// another precision profile or knob); params, gate params and the reference
// come from c. make_attn_case(s, seed) below is this with case_config(s).
inline AttnCase make_attn_case(const AttnSpec& s, const QsaConfig& c, uint64_t seed) {
  const int32_t ctx0 = s.ids + 150, ctx1 = std::max(s.ids / 2, 8) + 20;
  const int32_t pages_per_req = (std::max(ctx0 + 1, ctx1 + 2) + c.page_size - 1) / c.page_size;
  const int64_t num_pages = 2 * int64_t{pages_per_req};
  StepMetadata meta = s.one_row ? simple_step({ctx0}, {1}, pages_per_req)
                               : simple_step({ctx0, ctx1}, {1, 2}, pages_per_req, /*padding_rows=*/1);
  meta.ring_blocks = s.one_row ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1};
  const StepLayout full = derive_step_layout(c, {num_pages, num_pages}, meta);
  MainKvCache cache = random_kv_cache(c, full, num_pages, s.kv, seed);
  meta.block_table.at(0, 1) = -1;  // request 0 loses page 1 (tokens 64..127) after the writes
  StepLayout layout = derive_step_layout(c, {num_pages, num_pages}, meta);

  AttentionParams p = make_attention_params(c);
  p.index_width = s.ids + (s.count ? 1 : 0);
  const int64_t T = layout.num_tokens;
  TensorD q({T, c.num_heads, c.head_dim}), gate(q.shape);
  const CounterRng rq(seed, "gpu.attention.q"), rg(seed, "gpu.attention.gate"), ri(seed, "gpu.attention.ids");
  p.scale = std::ldexp(p.scale, -s.q_exponent);
  for (int64_t i = 0; i < q.numel(); ++i) {
    const int head = static_cast<int>((i / c.head_dim) % c.num_heads);
    const int e = s.q_exponent == 0 ? 0 : s.q_exponent + head % 3;
    q.data[i] = std::ldexp(round_bf16(rq.normal(static_cast<uint64_t>(i))), e);  // still a bf16 value
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

inline AttnCase make_attn_case(const AttnSpec& s, uint64_t seed) { return make_attn_case(s, case_config(s), seed); }

// Recomputes the reference outputs from the case's params, gate params and
// token_idx, after a test edited them.
inline void refresh_reference(AttnCase& c) {
  sparse_attention(c.params, c.q, c.token_idx, c.layout, c.cache, c.ref_attn);
  apply_gate(c.gate_params, c.ref_attn, c.gate, c.ref_gated);
}

// ---- prefill steps (tests/gpu/sparse_attention_prefill_test.cpp) ----------
// Several requests with long chunks (rows per request 1 .. 300) plus two
// padding rows, and index rows of one of these kinds:
//  - kRealistic: the reference's select + expand on the causal chunk, with
//    indexer queries that drift slowly along a request (base + 0.25 noise), so
//    neighbouring rows select largely the same blocks, as in a real prefill;
//  - kDisjoint: within every 16 consecutive rows of a request the rows attend
//    disjoint ranges (the largest union a tile can have);
//  - kDuplicates: realistic rows where a quarter of the counted columns
//    repeat an earlier column's id (ids listed two and more times);
//  - kHoles: realistic rows with -1 holes, ids past seq_len, ids below -1,
//    ids on request 0's unmapped page 0, random count bounds, a row that
//    attends nothing and junk ids in the padding rows.
enum class IdSet { kRealistic, kDisjoint, kDuplicates, kHoles };

struct PrefillAttnSpec {
  AttnSpec attn;  // dim, kv_heads, group, count, profile, KV dtype and knobs; attn.ids is derived
  int blocks_budget = 64;  // K_B
  int ratio = 4;           // r
  int page = 16;           // P (r must divide it)
  std::vector<int> chunk = {300, 1, 37};
  IdSet ids = IdSet::kRealistic;
};

inline int prefill_row_width(const PrefillAttnSpec& s) { return s.blocks_budget * s.ratio + s.ratio - 1; }

inline std::string prefill_spec_name(const PrefillAttnSpec& s) {
  AttnSpec a = s.attn;
  a.ids = prefill_row_width(s);
  std::string n = spec_name(a) + "_KB" + std::to_string(s.blocks_budget) + "_r" + std::to_string(s.ratio) + "_P" +
                  std::to_string(s.page) + "_rows";
  for (int c : s.chunk) n += "_" + std::to_string(c);
  const char* kinds[] = {"_realistic", "_disjoint", "_duplicates", "_holes"};
  return n + kinds[static_cast<int>(s.ids)];
}

inline void PrintTo(const PrefillAttnSpec& s, std::ostream* os) { *os << prefill_spec_name(s); }

// Token ids of a realistic prefill step: the reference's select and expand.
inline TensorI32 prefill_select_expand(const QsaConfig& c, const StepLayout& layout, uint64_t seed) {
  const int64_t T = layout.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim;
  TensorD qi({T, HI, dI});
  const CounterRng rq(seed, "gpu.prefill.q_index"), rk(seed, "gpu.prefill.k_index");
  for (int64_t row = 0; row < T; ++row) {
    const int req = std::max(layout.token_to_req[row], 0);
    for (int64_t j = 0; j < int64_t{HI} * dI; ++j)
      qi.data[static_cast<size_t>(row * HI * dI + j)] =
          rq.normal(static_cast<uint64_t>(req) * 65536 + static_cast<uint64_t>(j)) +
          0.25 * rq.normal((uint64_t{1} << 40) + static_cast<uint64_t>(row * HI * dI + j));
  }
  const SelectParams sp = make_select_params(c);
  TensorI32 blocks({T, sp.blocks_budget}, -1);
  TensorD top({T, sp.blocks_budget}, -std::numeric_limits<double>::infinity());
  for (int req = 0; req < layout.num_reqs; ++req) {
    const int64_t n_blocks = layout.seq_lens[req] / c.compress_ratio;
    TensorD kc;
    if (n_blocks > 0) {
      kc = TensorD({n_blocks, dI});
      for (int64_t i = 0; i < kc.numel(); ++i)
        kc.data[static_cast<size_t>(i)] = rk.normal(static_cast<uint64_t>(req) * (uint64_t{1} << 32) + static_cast<uint64_t>(i));
    }
    select_rows(sp, qi, layout.visible_blocks, layout.row_begin(req), layout.row_end(req), kc, blocks, top);
  }
  TensorI32 idx;
  expand_rows(make_expand_params(c), blocks, layout.pos, idx);
  return idx;
}

// The adversarial edits of `kind` on realistic rows (see IdSet).
inline void prefill_edit_ids(const PrefillAttnSpec& s, const StepLayout& layout, uint64_t seed, TensorI32& idx) {
  const CounterRng rng(seed, "gpu.prefill.edit");
  const int64_t W = prefill_row_width(s);
  const bool count = s.attn.count;
  for (int64_t row = 0; row < layout.num_tokens; ++row) {
    int32_t* ids = idx.row(row);
    const int req = layout.token_to_req[row];
    const uint64_t at = static_cast<uint64_t>(row) << 20;
    if (req < 0) {  // padding rows: junk ids, to be ignored
      if (s.ids == IdSet::kHoles)
        for (int64_t c = 0; c < W; ++c) ids[c] = static_cast<int32_t>(rng.bits(at + c) % 64);
      continue;
    }
    const int64_t L = layout.seq_lens[req];
    int64_t n = count ? ids[W] : W;  // counted columns
    if (s.ids == IdSet::kDisjoint) {
      const int64_t k = (row - layout.row_begin(req)) % 16;
      n = std::min<int64_t>(W, std::max<int64_t>(1, L / 16));
      for (int64_t c = 0; c < W; ++c) ids[c] = c < n ? static_cast<int32_t>(k * n + (n - 1 - c)) : -1;
      if (k * n + n > L)  // a short request: fewer ids, still disjoint
        for (int64_t c = 0; c < n; ++c) ids[c] = ids[c] < L ? ids[c] : -1;
    } else if (s.ids == IdSet::kDuplicates) {
      for (int64_t c = 1; c < n; ++c)
        if (rng.bits(at + c) % 4 == 0) ids[c] = ids[rng.bits(at + W + c) % static_cast<uint64_t>(c)];
    } else if (s.ids == IdSet::kHoles) {
      if (row == layout.row_begin(std::min(1, layout.num_reqs - 1)) && layout.num_reqs > 1) {
        for (int64_t c = 0; c < W; ++c) ids[c] = -1;  // attends nothing
      } else {
        for (int64_t c = 0; c < n; ++c) {
          const uint64_t kind = rng.bits(at + 2 * c) % 100;
          const int64_t u = static_cast<int64_t>(rng.bits(at + 2 * c + 1) >> 1);
          if (kind < 12) ids[c] = -1;
          else if (kind < 18) ids[c] = static_cast<int32_t>(L + u % 100);
          else if (kind < 22) ids[c] = static_cast<int32_t>(-2 - u % 8);
          else if (kind < 30 && req == 0) ids[c] = static_cast<int32_t>(u % s.page);  // unmapped page 0
        }
        if (count && rng.bits(at + 3 * W) % 3 == 0)  // a smaller bound: later columns must be ignored
          n = static_cast<int64_t>(rng.bits(at + 3 * W + 1) % static_cast<uint64_t>(n + 1));
      }
    }
    if (count) ids[W] = static_cast<int32_t>(n);
  }
}

inline AttnCase make_prefill_attn_case(const PrefillAttnSpec& s, uint64_t seed) {
  QsaConfig c = case_config(s.attn);
  c.page_size = s.page;
  c.compress_ratio = s.ratio;
  c.budget = s.blocks_budget * s.ratio;
  const int R = static_cast<int>(s.chunk.size());
  const int32_t K = c.budget;
  std::vector<int32_t> ctx(static_cast<size_t>(R));
  for (int i = 0; i < R; ++i) ctx[i] = i == 0 ? K + K / 2 + 7 : i == 1 ? K / 2 + 3 : i == 2 ? 5 : 40 + 17 * i;
  if (s.ids == IdSet::kHoles) ctx[0] = std::max(ctx[0], s.page + s.page / 2);  // page 0 holds context only
  int32_t max_len = 1;
  for (int i = 0; i < R; ++i) max_len = std::max(max_len, ctx[i] + s.chunk[i]);
  const int32_t pages_per_req = (max_len + c.page_size - 1) / c.page_size;
  const int64_t num_pages = int64_t{R} * pages_per_req;
  StepMetadata meta = simple_step(ctx, s.chunk, pages_per_req, /*padding_rows=*/2);
  meta.ring_blocks.clear();
  for (int i = 0; i < R; ++i) meta.ring_blocks.push_back(i);
  const StepLayout full = derive_step_layout(c, {num_pages, num_pages}, meta);
  MainKvCache cache = random_kv_cache(c, full, num_pages, s.attn.kv, seed);
  if (s.ids == IdSet::kHoles) meta.block_table.at(0, 0) = -1;  // after the writes, as a freed page
  const StepLayout layout = derive_step_layout(c, {num_pages, num_pages}, meta);

  TensorI32 idx = prefill_select_expand(c, full, seed);
  prefill_edit_ids(s, layout, seed, idx);

  AttentionParams p = make_attention_params(c);
  const int64_t T = layout.num_tokens;
  TensorD q({T, c.num_heads, c.head_dim}), gate(q.shape);
  const CounterRng rq(seed, "gpu.attention.q"), rg(seed, "gpu.attention.gate");
  for (int64_t i = 0; i < q.numel(); ++i) {
    q.data[i] = round_bf16(rq.normal(static_cast<uint64_t>(i)));
    gate.data[i] = round_bf16(rg.normal(static_cast<uint64_t>(i)));
  }
  TensorD ref_attn, ref_gated;
  sparse_attention(p, q, idx, layout, cache, ref_attn);
  const GateParams gp = make_gate_params(c);
  apply_gate(gp, ref_attn, gate, ref_gated);
  AttnSpec spec = s.attn;
  spec.ids = prefill_row_width(s);
  return {spec, c, p, gp, make_kv_cache_params(c, num_pages), layout, std::move(cache), q, gate, idx, ref_attn,
          ref_gated};
}

}  // namespace qsa::gpu_test
