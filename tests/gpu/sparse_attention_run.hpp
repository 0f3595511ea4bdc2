// Runs an AttnCase (sparse_attention_case.hpp) on the GPU and compares the
// outputs with the reference's, element by element, with the bounds of
// tests/tolerances.hpp ("GPU kernels against the reference").
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/common/bf16.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "reference/core/step_layout.hpp"
#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/tolerances.hpp"

namespace qsa::gpu_test {

struct GpuOutputs {
  std::vector<float> attn;
  std::vector<uint16_t> gated;
};

// x and y hold the same bits, element for element (NaN payloads included).
inline void expect_same_bits(const GpuOutputs& x, const GpuOutputs& y) {
  ASSERT_EQ(x.attn.size(), y.attn.size());
  for (size_t i = 0; i < x.attn.size(); ++i) {
    ASSERT_EQ(std::memcmp(&x.attn[i], &y.attn[i], sizeof(float)), 0)
        << "attn element " << i << ": " << x.attn[i] << " vs " << y.attn[i];
    ASSERT_EQ(x.gated[i], y.gated[i]) << "gated element " << i;
  }
}

// The device copies of the cache: K and V as [slots, G, D] bf16 bits or fp8
// codes, taken from the reference cache's stored bytes.
template <class T>
std::vector<T> cache_plane(const MainKvCache& cache, bool values_v) {
  const KvCacheParams& kp = cache.params();
  const int D = kp.head_dim;
  const bool bf16 = kp.dtype == KvDtype::kBf16;
  std::vector<T> out(static_cast<size_t>(cache.num_slots() * kp.kv_heads * D));
  for (int64_t slot = 0; slot < cache.num_slots(); ++slot)
    for (int g = 0; g < kp.kv_heads; ++g) {
      const uint8_t* code = cache.codes(slot, g);
      T* dst = &out[static_cast<size_t>((slot * kp.kv_heads + g) * D)];
      for (int d = 0; d < D; ++d) {
        const int e = (values_v ? D : 0) + d;
        dst[d] = bf16 ? static_cast<T>(code[2 * e] | (code[2 * e + 1] << 8)) : static_cast<T>(code[e]);
      }
    }
  return out;
}

inline std::vector<uint16_t> bf16_bits_of(const TensorD& t) {
  std::vector<uint16_t> out(t.data.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_bits(t.data[i]);
  return out;
}

inline gpu::SparseAttentionDims validate_case(const AttnCase& c) {
  return gpu::validate_sparse_attention(c.params, c.kv_params, c.token_idx, c.layout.token_to_req, c.layout.seq_lens,
                                        c.layout.block_table);
}

// The prefill path's plan for the case (built on the host, as a caller would).
inline gpu::SparseAttentionPrefillPlan prefill_plan(const AttnCase& c) {
  return gpu::plan_sparse_attention_prefill(c.params, validate_case(c), c.token_idx, c.layout.token_to_req,
                                            c.layout.seq_lens, c.layout.block_table);
}

// How run_gpu_path repeats its launch (launches > 1):
//  kPoisoned  on one stream, the workspace set to NaN before each repeat (a
//             merge that read partials before they were written would show it);
//  kStale     on one stream, every launch but the last with the queries
//             negated, the workspace left as each launch leaves it (a merge
//             that took an earlier launch's partials for its own would show it);
//  kGraph     kStale's launches as replays of one graph, captured once on a
//             stream of its own (the kernel arguments are the same every time).
enum class Repeat { kPoisoned, kStale, kGraph };

// Runs the case through `path`; a non-null plan is uploaded and passed in the
// prefill_* arguments (kAuto without a plan is the decode path). With
// misaligned_io the gate, attn and gated pointers sit one element past their
// allocations' starts (off the 8- and 16-byte boundaries of vector access).
// With launches > 1 the launch repeats as `repeat` says. A non-empty
// before_launches runs once every buffer is uploaded and poisoned (with no
// device-wide synchronisation left before the launches). With slots the
// launch also gets each id's cache slot (SparseAttentionArgs::token_slots,
// reference token_slots of the case, checked by validate_token_slots).
inline GpuOutputs run_gpu_path(const AttnCase& c, gpu::AttentionPath path, const gpu::SparseAttentionPrefillPlan* plan,
                               int ids_per_split = gpu::kDefaultIdsPerSplit, bool misaligned_io = false,
                               int launches = 1, Repeat repeat = Repeat::kPoisoned,
                               const std::function<void()>& before_launches = {}, bool slots = false) {
  const gpu::SparseAttentionDims dims = validate_case(c);
  TensorI32 slot_ids;
  if (slots) {
    token_slots(c.token_idx, c.params.count_column, c.layout.token_to_req, c.layout.seq_lens, c.layout.block_table,
                c.params.page_size, c.kv_params.num_pages, slot_ids);
    gpu::validate_token_slots(c.params, c.kv_params, c.token_idx, c.layout.token_to_req, c.layout.seq_lens,
                              c.layout.block_table, slot_ids);
  }
  gpu::DeviceBuffer<int32_t> slot_buf(slot_ids.data);
  const bool fp8 = c.kv_params.dtype == KvDtype::kFp8;
  const size_t pad = misaligned_io ? 1 : 0;
  std::vector<uint16_t> gate_bits = bf16_bits_of(c.gate);
  gate_bits.insert(gate_bits.begin(), pad, uint16_t{0});
  const std::vector<uint16_t> q_bits = bf16_bits_of(c.q);
  std::vector<uint16_t> q_negated;  // the earlier launches' queries where they differ
  if (launches > 1 && repeat != Repeat::kPoisoned) {
    q_negated = q_bits;
    for (uint16_t& bits : q_negated) bits ^= 0x8000u;
  }
  gpu::DeviceBuffer<uint16_t> q(q_bits), gate(gate_bits);
  gpu::DeviceBuffer<int32_t> idx(c.token_idx.data), t2r(c.layout.token_to_req), lens(c.layout.seq_lens),
      table(c.layout.block_table.data);
  gpu::DeviceBuffer<uint16_t> k16, v16;
  gpu::DeviceBuffer<uint8_t> k8, v8;
  if (fp8) {
    k8 = gpu::DeviceBuffer<uint8_t>(cache_plane<uint8_t>(c.cache, false));
    v8 = gpu::DeviceBuffer<uint8_t>(cache_plane<uint8_t>(c.cache, true));
  } else {
    k16 = gpu::DeviceBuffer<uint16_t>(cache_plane<uint16_t>(c.cache, false));
    v16 = gpu::DeviceBuffer<uint16_t>(cache_plane<uint16_t>(c.cache, true));
  }
  const size_t n_out = c.q.data.size();
  gpu::DeviceBuffer<float> attn(n_out + pad);
  gpu::DeviceBuffer<uint16_t> gated(n_out + pad);
  attn.poison(gpu::kPoisonFloat);
  gated.poison(gpu::kPoisonBf16Pair);
  const size_t ws_floats = gpu::sparse_attention_workspace_floats(c.params, dims, ids_per_split);
  gpu::DeviceBuffer<float> ws(ws_floats);
  ws.poison(gpu::kPoisonFloat);  // partials must be written before the merge reads them

  gpu::SparseAttentionArgs a;
  a.q = q.get();
  a.gate = gate.get() + pad;
  a.token_idx = idx.get();
  a.token_slots = slots ? slot_buf.get() : nullptr;
  a.token_to_req = t2r.get();
  a.seq_lens = lens.get();
  a.block_table = table.get();
  a.k_cache = fp8 ? static_cast<const void*>(k8.get()) : static_cast<const void*>(k16.get());
  a.v_cache = fp8 ? static_cast<const void*>(v8.get()) : static_cast<const void*>(v16.get());
  a.attn = attn.get() + pad;
  a.gated = gated.get() + pad;
  a.workspace = ws.get();
  a.workspace_floats = ws_floats;
  gpu::DeviceBuffer<int32_t> tiles, plan_ids;
  gpu::DeviceBuffer<uint32_t> plan_masks;
  if (plan != nullptr) {
    tiles = gpu::DeviceBuffer<int32_t>(plan->tiles);
    plan_ids = gpu::DeviceBuffer<int32_t>(plan->ids);
    plan_masks = gpu::DeviceBuffer<uint32_t>(plan->masks);
    a.prefill_tiles = tiles.get();
    a.prefill_ids = plan_ids.get();
    a.prefill_masks = plan_masks.get();
    a.prefill_num_tiles = plan->num_tiles();
    a.prefill_num_entries = plan->num_entries();
    a.prefill_rows_per_tile = plan->rows_per_tile;
    a.prefill_row_ids = plan->row_ids;
  }
  if (before_launches) before_launches();
  const auto launch = [&](hipStream_t stream) {
    gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, dims, a, stream, ids_per_split, path);
  };
  if (repeat == Repeat::kGraph && launches > 1) {
    hipStream_t stream = nullptr;
    hipGraph_t graph = nullptr;
    hipGraphExec_t exec = nullptr;
    QSA_GPU_CHECK(hipStreamCreate(&stream));
    QSA_GPU_CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal));
    launch(stream);
    QSA_GPU_CHECK(hipStreamEndCapture(stream, &graph));
    QSA_GPU_CHECK(hipGraphInstantiateWithFlags(&exec, graph, 0));
    for (int i = 0; i < launches; ++i) {
      q.upload(i + 1 < launches ? q_negated : q_bits);  // synchronous: the last replay has finished
      QSA_GPU_CHECK(hipGraphLaunch(exec, stream));
      QSA_GPU_CHECK(hipStreamSynchronize(stream));
    }
    QSA_GPU_CHECK(hipGraphExecDestroy(exec));
    QSA_GPU_CHECK(hipGraphDestroy(graph));
    QSA_GPU_CHECK(hipStreamDestroy(stream));
  } else {
    for (int i = 0; i < launches; ++i) {
      if (repeat == Repeat::kPoisoned && i > 0 && ws_floats > 0)
        QSA_GPU_CHECK(hipMemsetAsync(ws.get(), 0xff, ws_floats * sizeof(float), nullptr));
      if (repeat == Repeat::kStale) q.upload(i + 1 < launches ? q_negated : q_bits);
      launch(nullptr);
    }
  }
  QSA_GPU_CHECK(hipDeviceSynchronize());
  GpuOutputs out{attn.download(), gated.download()};
  out.attn.erase(out.attn.begin(), out.attn.begin() + static_cast<std::ptrdiff_t>(pad));
  out.gated.erase(out.gated.begin(), out.gated.begin() + static_cast<std::ptrdiff_t>(pad));
  return out;
}

inline GpuOutputs run_gpu(const AttnCase& c, int ids_per_split = gpu::kDefaultIdsPerSplit) {
  return run_gpu_path(c, gpu::AttentionPath::kAuto, nullptr, ids_per_split);
}

// What the tolerance of one (row, head) depends on: the attended ids' max
// |V|, max scale·Σ|q k| and max |logit|, and their number.
struct HeadStats {
  double v_max = 0.0, s_abs = 0.0, s_max = 0.0;
  int64_t n = 0;
};

inline HeadStats head_stats(const AttnCase& c, int64_t row, int h) {
  HeadStats st;
  const int req = c.layout.token_to_req[row];
  if (req < 0) return st;
  const AttentionParams& p = c.params;
  const int D = p.head_dim, g = h / (p.heads / p.kv_heads);
  const int32_t* ids = c.token_idx.row(row);
  int64_t n = p.index_width;
  if (p.count_column) n = std::clamp<int64_t>(ids[n - 1], 0, n - 1);
  const double* qh = c.q.row(row) + int64_t{h} * D;
  for (int64_t col = 0; col < n; ++col) {
    const int32_t t = ids[col];
    if (t < 0 || t >= c.layout.seq_lens[req]) continue;
    const int64_t slot = paged_slot(c.layout.block_table, req, t, p.page_size);
    if (slot < 0) continue;
    double abs_dot = 0.0, dot = 0.0;
    for (int d = 0; d < D; ++d) {
      abs_dot += std::fabs(qh[d] * c.cache.k(slot, g)[d]);
      dot += qh[d] * c.cache.k(slot, g)[d];
      st.v_max = std::max(st.v_max, std::fabs(c.cache.v(slot, g)[d]));
    }
    st.s_abs = std::max(st.s_abs, abs_dot * p.scale);
    st.s_max = std::max(st.s_max, std::fabs(dot * p.scale));
    ++st.n;
  }
  return st;
}

// The fp32 bound of A for one (row, head) with stats st: the decode
// kernel's, or with `entries` >= 0 the prefill kernel's for a tile of that
// many entries; plus the bf16-P and bf16-logit terms the knobs ask for.
inline double head_tol(const AttnCase& c, const HeadStats& st, double entries = -1.0) {
  const AttentionParams& p = c.params;
  const double n = static_cast<double>(st.n);
  double tol = entries < 0.0 ? tol::gpu_attention_fp32_tol(st.v_max, st.s_abs, p.head_dim, n)
                             : tol::gpu_attention_prefill_fp32_tol(st.v_max, st.s_abs, p.head_dim, n, entries);
  if (p.p_rounding == PRounding::kBf16Unnormalized) tol += tol::kGpuAttentionBf16PRel * st.v_max;
  if (p.p_rounding == PRounding::kBf16Normalized) tol += tol::kGpuAttentionBf16NormalizedPRel * st.v_max;
  if (p.round_logits) tol += tol::gpu_attention_round_logits_tol(st.v_max, st.s_max);
  return tol;
}

// Bounds of element i of A and of O against the reference, from its head's bound.
struct ElementTol {
  double attn, gated;
};
inline ElementTol element_tol(const AttnCase& c, double tol, size_t i) {
  const double ref = c.ref_attn.data[i], ref_g = c.ref_gated.data[i];
  const double tol_a = c.params.round_output ? tol::gpu_bf16_store_tol(tol, std::fabs(ref)) : tol;
  const double sig = 1.0 / (1.0 + std::exp(-c.gate.data[i]));
  double tol_g = tol_a * sig + tol::kGpuGateFp32Rel * std::fabs(ref_g);
  if (c.gate_params.round_sigmoid) tol_g += kBf16Eps * std::fabs(ref);
  return {tol_a, tol::gpu_bf16_store_tol(tol_g, std::fabs(ref_g))};
}

// Element-wise comparison; reports the number of failures and the worst
// element (error over tolerance) with its coordinates.
inline void expect_matches_reference(const AttnCase& c, const GpuOutputs& out) {
  const AttentionParams& p = c.params;
  const int64_t T = c.layout.num_tokens;
  const int H = p.heads, D = p.head_dim;
  int64_t failures = 0;
  double worst = 0.0, worst_rel = 0.0;  // error over tolerance; A's error over its head's max |V|
  std::string worst_at;
  auto check = [&](bool ok, double ratio, const std::string& what) {
    if (!ok) ++failures;
    if (!ok && failures <= 5) ADD_FAILURE() << what;
    if (ratio > worst) {
      worst = ratio;
      worst_at = what;
    }
  };
  for (int64_t row = 0; row < T; ++row)
    for (int h = 0; h < H; ++h) {
      const HeadStats st = head_stats(c, row, h);
      const double tol = head_tol(c, st);
      for (int d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((row * H + h) * D + d);
        const double ref = c.ref_attn.data[i], ref_g = c.ref_gated.data[i];
        const double got = out.attn[i], got_g = gpu::bf16_to_float(out.gated[i]);
        const std::string at = "row " + std::to_string(row) + " head " + std::to_string(h) + " dim " +
                               std::to_string(d) + " (" + std::to_string(st.n) + " ids): ";
        if (st.n == 0) {  // padding rows and rows without an attended id are exactly 0
          check(out.attn[i] == 0.0f && out.gated[i] == 0, 0.0,
                at + "expected exact zeros, got attn " + std::to_string(got) + " gated bits " +
                    std::to_string(out.gated[i]));
          continue;
        }
        const ElementTol et = element_tol(c, tol, i);
        const double tol_a = et.attn, tol_g = et.gated;
        const double err = std::fabs(got - ref), err_g = std::fabs(got_g - ref_g);
        if (st.v_max > 0.0) worst_rel = std::max(worst_rel, err / st.v_max);
        check(err <= tol_a, err / tol_a,
              at + "attn " + std::to_string(got) + " vs reference " + std::to_string(ref) + " (tolerance " +
                  std::to_string(tol_a) + ")");
        check(err_g <= tol_g, err_g / tol_g,
              at + "gated " + std::to_string(got_g) + " vs reference " + std::to_string(ref_g) + " (tolerance " +
                  std::to_string(tol_g) + ")");
      }
    }
  EXPECT_EQ(failures, 0) << "worst error / tolerance " << worst << " at " << worst_at;
  testing::Test::RecordProperty("worst_error_over_tolerance", std::to_string(worst));
  // The bounds' unit (tests/tolerances.hpp): what a change of numerics moved, whatever its tolerance.
  char rel[32];
  std::snprintf(rel, sizeof rel, "%.3e", worst_rel);
  testing::Test::RecordProperty("worst_attn_error_over_v_max", rel);
}

// Entries of the prefill tile holding each row (-1: no tile holds it).
inline std::vector<double> row_tile_entries(const AttnCase& c, const gpu::SparseAttentionPrefillPlan& plan) {
  std::vector<double> out(static_cast<size_t>(c.layout.num_tokens), -1.0);
  for (int64_t t = 0; t < plan.num_tiles(); ++t) {
    const int32_t* tile = &plan.tiles[static_cast<size_t>(4 * t)];
    for (int32_t r = 0; r < tile[1]; ++r) out[static_cast<size_t>(tile[0] + r)] = tile[3];
  }
  return out;
}

// The prefill path's outputs against the reference (its own bound), the
// decode path's against the reference (the decode bound), and the two paths
// against each other (tol::gpu_attention_path_agreement_tol of the two), on
// A and O; rows that attend nothing must be exact zeros on both paths.
// skip_rows (optional, [T]): rows not compared (the caller checks them its
// own way).
inline void expect_prefill_matches(const AttnCase& c, const GpuOutputs& decode, const GpuOutputs& prefill,
                                   const gpu::SparseAttentionPrefillPlan& plan,
                                   const std::vector<char>* skip_rows = nullptr) {
  const AttentionParams& p = c.params;
  const int64_t T = c.layout.num_tokens;
  const int H = p.heads, D = p.head_dim;
  const std::vector<double> entries = row_tile_entries(c, plan);
  const char* names[3] = {"prefill vs reference", "decode vs reference", "prefill vs decode"};
  int64_t failures[3] = {0, 0, 0};
  double worst[3] = {0.0, 0.0, 0.0};
  std::string worst_at[3];
  // Messages are built only for failures and new worst cases (millions of elements pass).
  auto check = [&](int rel, double got, double want, double tol, const char* what, int64_t row, int h, int d,
                   int64_t n) {
    const double err = std::fabs(got - want);
    const bool ok = err <= tol;
    if (ok && err <= worst[rel] * tol) return;
    const std::string at = "row " + std::to_string(row) + " head " + std::to_string(h) + " dim " + std::to_string(d) +
                           " (" + std::to_string(n) + " ids, tile of " +
                           std::to_string(static_cast<int64_t>(entries[static_cast<size_t>(row)])) + " entries) " +
                           what + " " + std::to_string(got) + " vs " + std::to_string(want);
    if (!ok && ++failures[rel] <= 5) ADD_FAILURE() << names[rel] << ": " << at << ", error " << err << " > " << tol;
    if (err / tol > worst[rel]) {
      worst[rel] = err / tol;
      worst_at[rel] = at;
    }
  };
  std::vector<HeadStats> stats(static_cast<size_t>(T * H));  // the costly part: computed in parallel
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < T * H; ++i) stats[static_cast<size_t>(i)] = head_stats(c, i / H, static_cast<int>(i % H));
  for (int64_t row = 0; row < T; ++row) {
    ASSERT_GE(entries[static_cast<size_t>(row)], 0.0) << "row " << row << " lies in no prefill tile";
    if (skip_rows != nullptr && (*skip_rows)[static_cast<size_t>(row)]) continue;
    for (int h = 0; h < H; ++h) {
      const HeadStats& st = stats[static_cast<size_t>(row * H + h)];
      const double tol_d = head_tol(c, st), tol_p = head_tol(c, st, entries[static_cast<size_t>(row)]);
      for (int d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((row * H + h) * D + d);
        if (st.n == 0) {  // padding rows and rows without an attended id are exactly 0 on both paths
          const bool zero = prefill.attn[i] == 0.0f && prefill.gated[i] == 0 && decode.attn[i] == 0.0f &&
                            decode.gated[i] == 0;
          if (!zero && ++failures[0] <= 5)
            ADD_FAILURE() << "row " << row << " head " << h << " dim " << d
                          << ": expected exact zeros, got prefill attn " << prefill.attn[i] << " gated bits "
                          << prefill.gated[i] << ", decode attn " << decode.attn[i] << " gated bits "
                          << decode.gated[i];
          continue;
        }
        const ElementTol et_d = element_tol(c, tol_d, i), et_p = element_tol(c, tol_p, i);
        const double ref = c.ref_attn.data[i], ref_g = c.ref_gated.data[i];
        const double pa = prefill.attn[i], pg = gpu::bf16_to_float(prefill.gated[i]);
        const double da = decode.attn[i], dg = gpu::bf16_to_float(decode.gated[i]);
        check(0, pa, ref, et_p.attn, "attn", row, h, d, st.n);
        check(0, pg, ref_g, et_p.gated, "gated", row, h, d, st.n);
        check(1, da, ref, et_d.attn, "attn", row, h, d, st.n);
        check(1, dg, ref_g, et_d.gated, "gated", row, h, d, st.n);
        check(2, pa, da, tol::gpu_attention_path_agreement_tol(et_d.attn, et_p.attn), "attn", row, h, d, st.n);
        check(2, pg, dg, tol::gpu_attention_path_agreement_tol(et_d.gated, et_p.gated), "gated", row, h, d, st.n);
      }
    }
  }
  for (int rel = 0; rel < 3; ++rel) {
    EXPECT_EQ(failures[rel], 0) << names[rel] << ": worst error / tolerance " << worst[rel] << " at "
                                << worst_at[rel];
    testing::Test::RecordProperty(std::string("worst_") + (rel == 0 ? "prefill" : rel == 1 ? "decode" : "paths"),
                                  std::to_string(worst[rel]));
  }
}

}  // namespace qsa::gpu_test
