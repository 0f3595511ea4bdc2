// One GPU select problem for the GPU tests (tests/gpu/select_test.cpp, the
// decode path; tests/gpu/select_prefill_test.cpp, the prefill path): the host
// copies of everything launch_select reads, how they are filled, the launch
// with poisoned outputs, the fp64 reference on the same decoded inputs and
// the per-row comparison of the two:
//  - phase 1: every visible block's fp32 score (read back from the scratch)
//    within tol::gpu_select_score_tol of the reference's fp64 score;
//  - phase 2: the ids and scores are exactly qsa::top_k_blocks applied to the
//    GPU's own fp32 scores (so the radix select and the sort are bit-exact);
//  - end to end: tie-aware agreement with qsa::select_rows, and identical ids
//    wherever the reference's scores around a position are further apart
//    than the bound (everywhere when `exact_ids`); NaN positions exactly.
// Included by two .cpp files of one binary: inline functions and types in a
// named namespace, no internal-linkage entities.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "gpu/select/select.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"
#include "reference/select.hpp"
#include "tests/tolerances.hpp"

namespace qsa::select_test {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// How compressed keys are filled. kSampleHigh / kSampleLow: random, but the
// blocks a strided sample of 1024 keys would read (every (V / 1024)-th of
// request 0) score far above / at the bottom of the rest, so that a
// threshold taken from such a sample gathers too few / too many keys: the
// sampled top-k must notice and fall back (gpu/select/select_topk.hpp).
enum class Keys { kRandom, kTies, kNan, kSampleHigh, kSampleLow };

// One launch: requests whose rows are contiguous (padding rows, -1, between
// and after them), a paged compressed-key cache with shuffled physical pages.
struct Scenario {
  SelectParams p;
  gpu::IndexerCodes codes;
  int rows_per_page = 1;
  int64_t num_pages = 0;
  std::vector<int32_t> token_to_req, visible;
  TensorI32 table;                // [R, max_pages]
  std::vector<uint16_t> q_codes;  // [T, H, d] bf16 bits or fp8 codes
  std::vector<uint16_t> k_codes;  // [num_pages * rows_per_page, d]

  int64_t rows() const { return static_cast<int64_t>(token_to_req.size()); }
  double decode(uint32_t code) const {
    if (codes.dtype == IndexerDtype::kBf16) return bf16_value(static_cast<uint16_t>(code));
    return fp8_decode(static_cast<uint8_t>(code), codes.fp8_flavor);
  }
  uint16_t encode(double x) const {
    if (codes.dtype == IndexerDtype::kBf16) return bf16_bits(x);
    return fp8_encode(x, codes.fp8_flavor);
  }
  uint16_t nan_code() const {
    if (codes.dtype == IndexerDtype::kBf16) return 0x7FC0u;
    return codes.fp8_flavor == Fp8Flavor::kE4m3fnuz ? 0x80u : 0x7Fu;
  }
  int64_t cache_row(int req, int64_t b) const {
    return int64_t{table.at(req, b / rows_per_page)} * rows_per_page + b % rows_per_page;
  }
  // One NaN element in compressed block b of request req.
  void set_nan_block(int req, int64_t b) {
    k_codes[static_cast<size_t>(cache_row(req, b) * p.dim + b % p.dim)] = nan_code();
  }
};

// "bf16", "fp8fn" or "fp8fnuz" (e4m3fn with eager NaN names as fp8fn): case names.
inline std::string codes_name(IndexerDtype dtype, Fp8Flavor flavor) {
  if (dtype == IndexerDtype::kBf16) return "bf16";
  return flavor == Fp8Flavor::kE4m3fnuz ? "fp8fnuz" : "fp8fn";
}

// "", "_ties" or "_nan": case names.
inline std::string keys_name(Keys keys) {
  if (keys == Keys::kTies) return "_ties";
  if (keys == Keys::kNan) return "_nan";
  if (keys == Keys::kSampleHigh) return "_samplehigh";
  if (keys == Keys::kSampleLow) return "_samplelow";
  return "";
}

// A scenario with a case's params and codes and nothing else yet; exact ties
// want score_scale 1 (see make_exact_ties).
inline Scenario scenario_for(int heads, int dim, int budget, IndexerDtype dtype, Fp8Flavor flavor, Keys keys) {
  Scenario s;
  s.p.heads = heads;
  s.p.dim = dim;
  s.p.blocks_budget = budget;
  s.p.score_scale = keys == Keys::kTies ? 1.0 : 1.0 / std::sqrt(static_cast<double>(dim));
  s.codes = {dtype, flavor};
  return s;
}

// Maps pages[req] pages of every request onto a seeded permutation of the
// s.num_pages physical pages (so logical neighbours are far apart); the
// table has max_pages columns, unmapped ones -1.
inline void map_shuffled_pages(Scenario& s, const std::vector<int64_t>& pages, int64_t max_pages, uint64_t seed,
                               const std::string& stream) {
  std::vector<int32_t> perm(static_cast<size_t>(s.num_pages));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  const CounterRng shuffle(seed, stream + ".pages");
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[static_cast<size_t>(shuffle.bits(i) % i)]);
  s.table = TensorI32({static_cast<int64_t>(pages.size()), max_pages}, -1);
  size_t next = 0;
  for (size_t req = 0; req < pages.size(); ++req)
    for (int64_t pg = 0; pg < pages[req]; ++pg) s.table.at(static_cast<int64_t>(req), pg) = perm[next++];
}

// Random codes: normal queries, keys uniform in [-2, 2) (cheaper than
// normals for 10^7 values), the whole cache including unmapped pages.
inline void fill_random_codes(Scenario& s, uint64_t seed, const std::string& stream) {
  const int64_t hd = int64_t{s.p.heads} * s.p.dim;
  const CounterRng qrng(seed, stream + ".q");
  s.q_codes.resize(static_cast<size_t>(s.rows() * hd));
  for (size_t i = 0; i < s.q_codes.size(); ++i) s.q_codes[i] = s.encode(qrng.normal(i));
  const CounterRng krng(seed, stream + ".k");
  s.k_codes.assign(static_cast<size_t>(s.num_pages * s.rows_per_page * s.p.dim), uint16_t{0});
  for (size_t i = 0; i < s.k_codes.size(); ++i) s.k_codes[i] = s.encode(4.0 * krng.uniform(i) - 2.0);
}

// Exact ties over blocks [0, blocks[req]) of every request: every block holds
// c_m * base with c_m in {0, 1, 2, 4} and base = every row's head-0 query
// (rows share it): scores are exactly c_m * L_t with L_t >= |base|^2 > 0,
// power-of-two scaling is exact in every format, so duplicated blocks tie
// exactly on both sides and the levels are far apart. Wants score_scale 1.
inline void make_exact_ties(Scenario& s, const std::vector<int64_t>& blocks, uint64_t seed,
                            const std::string& stream) {
  const int d = s.p.dim;
  const int64_t hd = int64_t{s.p.heads} * d;
  for (int64_t t = 1; t < s.rows(); ++t) std::copy_n(s.q_codes.begin(), d, s.q_codes.begin() + t * hd);
  const CounterRng level(seed, stream + ".level");
  const double scale[4] = {0.0, 1.0, 2.0, 4.0};
  for (int req = 0; req < static_cast<int>(blocks.size()); ++req)
    for (int64_t b = 0; b < blocks[req]; ++b) {
      const double m = scale[level.bits(static_cast<uint64_t>(req * 1000003 + b)) % 4];
      for (int j = 0; j < d; ++j)
        s.k_codes[static_cast<size_t>(s.cache_row(req, b) * d + j)] = s.encode(m * s.decode(s.q_codes[j]));
    }
}

// Blocks i * (visible / 1024), i < 1024, of request 0 hold m * base, base =
// every row's head-0 query (rows share it): m = 2 scores them far above the
// random keys (|base|^2 against a spread of ~|base|), m = 0 at zero.
inline void mark_sampled_blocks(Scenario& s, int64_t visible, double m) {
  const int d = s.p.dim;
  const int64_t hd = int64_t{s.p.heads} * d;
  for (int64_t t = 1; t < s.rows(); ++t) std::copy_n(s.q_codes.begin(), d, s.q_codes.begin() + t * hd);
  const int64_t stride = visible / 1024;
  for (int64_t i = 0; stride > 0 && i < 1024; ++i)
    for (int j = 0; j < d; ++j)
      s.k_codes[static_cast<size_t>(s.cache_row(0, i * stride) * d + j)] = s.encode(m * s.decode(s.q_codes[j]));
}

struct GpuResult {
  std::vector<int32_t> ids;
  std::vector<float> scores;
  std::vector<float> scratch;  // select_scratch_floats: [T, score_stride] scores, then the row histograms
};

// The element type the kernel reads: the codes as they are (bf16) or narrowed to bytes (fp8).
template <class Code>
gpu::DeviceBuffer<Code> upload_codes(const std::vector<uint16_t>& v) {
  if constexpr (std::is_same_v<Code, uint16_t>) {
    return gpu::DeviceBuffer<Code>(v);
  } else {
    std::vector<Code> bytes(v.size());
    for (size_t i = 0; i < v.size(); ++i) bytes[i] = static_cast<Code>(v[i]);
    return gpu::DeviceBuffer<Code>(bytes);
  }
}

// One launch_select through `path`, every output and the scratch's scores
// poisoned first, its row histograms zeroed as select.hpp asks (or set to
// `hist`, [T, kSelectRowHistBins], when given). The compressed cache starts
// `cache_offset` codes into its device buffer (0: the allocation's own
// alignment; 1: misaligned for 16-byte reads).
template <class Code>
GpuResult run_gpu_typed(const Scenario& s, const gpu::SelectLayout& l, gpu::SelectPath path, int cache_offset,
                        const std::vector<uint32_t>* hist) {
  gpu::DeviceBuffer<Code> q = upload_codes<Code>(s.q_codes);
  std::vector<uint16_t> shifted(static_cast<size_t>(cache_offset), uint16_t{0});
  shifted.insert(shifted.end(), s.k_codes.begin(), s.k_codes.end());
  gpu::DeviceBuffer<Code> k = upload_codes<Code>(shifted);
  gpu::DeviceBuffer<int32_t> req(s.token_to_req), vis(s.visible), table(s.table.data);
  const size_t out_n = static_cast<size_t>(s.rows()) * static_cast<size_t>(s.p.blocks_budget);
  gpu::DeviceBuffer<int32_t> ids(out_n);
  gpu::DeviceBuffer<float> scores(out_n), scratch(gpu::select_scratch_floats(l));
  ids.poison(gpu::kPoisonId);
  scores.poison(gpu::kPoisonFloat);
  scratch.poison(gpu::kPoisonFloat);
  if (hist == nullptr) {
    gpu::select_zero_row_hist(l, scratch.get(), hipStream_t{});
  } else if (gpu::select_has_row_hist(l)) {
    QSA_GPU_CHECK(hipMemcpy(scratch.get() + gpu::select_row_hist_offset(l), hist->data(),
                            hist->size() * sizeof(uint32_t), hipMemcpyHostToDevice));
  }
  gpu::launch_select(s.p, s.codes, l, q.get(), k.get() + cache_offset, req.get(), vis.get(), table.get(),
                     scratch.get(), ids.get(), scores.get(), hipStream_t{}, path);
  QSA_GPU_CHECK(hipDeviceSynchronize());
  return {ids.download(), scores.download(), scratch.download()};
}

inline GpuResult run_gpu(const Scenario& s, const gpu::SelectLayout& l,
                         gpu::SelectPath path = gpu::SelectPath::kAuto, int cache_offset = 0,
                         const std::vector<uint32_t>* hist = nullptr) {
  if (s.codes.dtype == IndexerDtype::kBf16) return run_gpu_typed<uint16_t>(s, l, path, cache_offset, hist);
  return run_gpu_typed<uint8_t>(s, l, path, cache_offset, hist);
}

// The row histograms of a scratch as the launch left them.
inline std::vector<uint32_t> row_hist_of(const GpuResult& g, const gpu::SelectLayout& l) {
  if (!gpu::select_has_row_hist(l)) return {};
  const size_t at = gpu::select_row_hist_offset(l);
  std::vector<uint32_t> out(g.scratch.size() - at);
  std::memcpy(out.data(), g.scratch.data() + at, out.size() * sizeof(uint32_t));
  return out;
}

// The reference on the same decoded inputs.
struct RefResult {
  TensorI32 ids;                            // select_rows
  TensorD top;                              // select_rows
  std::vector<std::vector<double>> scores;  // [T][V_t] block_scores_row
  std::vector<std::vector<double>> tol;     // [T][V_t] gpu_select_score_tol
};

inline RefResult run_reference(const Scenario& s) {
  const int H = s.p.heads, d = s.p.dim;
  TensorD q({s.rows(), H, d});
  for (int64_t i = 0; i < q.numel(); ++i) q.data[i] = s.decode(s.q_codes[i]);
  RefResult r;
  r.scores.resize(static_cast<size_t>(s.rows()));
  r.tol.resize(static_cast<size_t>(s.rows()));
  r.ids = TensorI32({s.rows(), s.p.blocks_budget}, -1);  // as select_rows fills them
  r.top = TensorD({s.rows(), s.p.blocks_budget}, kNegInf);
  for (int req = 0; req < static_cast<int>(s.table.dim(0)); ++req) {
    // The request's rows [t0, t1) (contiguous in every scenario) and the most blocks one of them sees.
    int64_t t0 = 0;
    while (t0 < s.rows() && s.token_to_req[t0] != req) ++t0;
    int64_t t1 = t0;
    int32_t max_v = 0;
    for (; t1 < s.rows() && s.token_to_req[t1] == req; ++t1) max_v = std::max(max_v, s.visible[t1]);
    TensorD kc({max_v, d});  // the gather of reference/compress.cpp, from codes
    for (int64_t b = 0; b < max_v; ++b)
      for (int j = 0; j < d; ++j) kc.at(b, j) = s.decode(s.k_codes[static_cast<size_t>(s.cache_row(req, b) * d + j)]);
    select_rows(s.p, q, s.visible, t0, t1, kc, r.ids, r.top);
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t V = s.visible[t];
      // sum_h sum_j |q_hj k_j| = sum_j (sum_h |q_hj|) |k_j|
      std::vector<double> q_abs(static_cast<size_t>(d), 0.0);
      for (int h = 0; h < H; ++h)
        for (int j = 0; j < d; ++j) q_abs[j] += std::fabs(q.at(t, h, j));
      r.scores[t].resize(static_cast<size_t>(V));
      r.tol[t].resize(static_cast<size_t>(V));
      block_scores_row(s.p, q.row(t), kc.ptr(), V, r.scores[t].data());
      for (int32_t b = 0; b < V; ++b) {
        double abs_sum = 0.0;
        for (int j = 0; j < d; ++j) abs_sum += q_abs[j] * std::fabs(kc.at(b, j));
        r.tol[t][b] = tol::gpu_select_score_tol(std::fabs(s.p.score_scale) * abs_sum, d, H);
      }
    }
  }
  return r;
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Equal as reported values: both NaN, or equal numbers.
inline bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// All checks of one row; `exact_ids` demands the reference's ids everywhere
// (scenarios whose ties are exact and whose levels are far apart).
inline void check_row(const Scenario& s, const RefResult& ref, const GpuResult& g, const gpu::SelectLayout& l,
                      int64_t t, bool exact_ids) {
  SCOPED_TRACE(testing::Message() << "row " << t << ", V = " << s.visible[t] << ", request " << s.token_to_req[t]);
  const int KB = s.p.blocks_budget;
  const int32_t V = s.visible[t];
  const int32_t* ids = g.ids.data() + t * KB;
  const float* top = g.scores.data() + t * KB;
  const float* scr = g.scratch.data() + t * l.score_stride;
  for (int i = 0; i < KB; ++i) {
    ASSERT_NE(static_cast<uint32_t>(ids[i]), gpu::kPoisonId) << "block_ids[" << t << ", " << i << "] not written";
    ASSERT_NE(bits_of(top[i]), gpu::kPoisonFloat) << "block_scores[" << t << ", " << i << "] not written";
  }
  for (int32_t b = 0; b < V; ++b)
    ASSERT_NE(bits_of(scr[b]), gpu::kPoisonFloat) << "score of block " << b << " not written";
  // Phase 1: every score within the bound (NaN exactly where the reference has NaN).
  int bad = 0;
  for (int32_t b = 0; b < V && bad < 5; ++b) {
    const double r = ref.scores[t][b];
    const double gs = scr[b];
    const bool ok = std::isnan(r) ? std::isnan(gs) : std::fabs(gs - r) <= ref.tol[t][b];
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "score of block " << b << ": gpu " << gs << ", reference " << r << ", tol " << ref.tol[t][b];
  }
  // Phase 2: exactly the canonical top-k of the GPU's own scores.
  std::vector<double> g64(scr, scr + V);
  std::vector<int32_t> want_ids(static_cast<size_t>(KB));
  std::vector<double> want_top(static_cast<size_t>(KB));
  const int k = top_k_blocks(g64.data(), V, KB, want_ids.data(), want_top.data());
  for (int i = 0; i < KB; ++i) {
    ASSERT_EQ(ids[i], want_ids[i]) << "position " << i << " is not the top-k of the GPU's own scores";
    ASSERT_TRUE(same_value(top[i], want_top[i])) << "position " << i << ": " << top[i] << " vs " << want_top[i];
  }
  // End to end against select_rows, tie-aware.
  const int32_t* rids = ref.ids.row(t);
  const double* rtop = ref.top.row(t);
  ASSERT_EQ(k, std::min(V, KB));
  for (int i = k; i < KB; ++i) ASSERT_EQ(rids[i], -1);
  if (exact_ids) {
    for (int i = 0; i < k; ++i) ASSERT_EQ(ids[i], rids[i]) << "position " << i;
    return;
  }
  std::vector<char> chosen(static_cast<size_t>(V), 0), ref_chosen(static_cast<size_t>(V), 0);
  for (int i = 0; i < k; ++i) {
    chosen[ids[i]] = 1;
    ref_chosen[rids[i]] = 1;
  }
  double tol_max = 0.0;
  for (double x : ref.tol[t]) tol_max = std::max(tol_max, x);
  // No unselected block may beat a selected one by more than both bounds;
  // next_out: the best block the reference left out (the (k+1)-th).
  double sel_upper = std::numeric_limits<double>::infinity(), unsel_lower = kNegInf, next_out = kNegInf;
  bool sel_number = false, unsel_nan = false;
  for (int32_t b = 0; b < V; ++b) {
    const double r = ref.scores[t][b];
    if (chosen[b] && !std::isnan(r)) {
      sel_number = true;
      sel_upper = std::min(sel_upper, r + ref.tol[t][b]);
    } else if (!chosen[b]) {
      if (std::isnan(r)) unsel_nan = true;
      else unsel_lower = std::max(unsel_lower, r - ref.tol[t][b]);
    }
    if (!ref_chosen[b]) next_out = std::max(next_out, r);
  }
  EXPECT_FALSE(unsel_nan && sel_number) << "a NaN-scored block lost to a number";
  EXPECT_LE(unsel_lower, sel_upper) << "an unselected block beats a selected one beyond the fp32 bound";
  // Identical ids where the reference's neighbours sit further apart than 2 bounds; NaN positions exactly.
  for (int i = 0; i < k; ++i) {
    if (std::isnan(rtop[i])) {
      EXPECT_EQ(ids[i], rids[i]) << "NaN position " << i;
      continue;
    }
    const double above = i > 0 ? rtop[i - 1] : std::numeric_limits<double>::infinity();
    const double below = i + 1 < k ? rtop[i + 1] : next_out;
    const bool clear = (std::isnan(above) || above - rtop[i] > 2 * tol_max) && rtop[i] - below > 2 * tol_max;
    if (clear) {
      EXPECT_EQ(ids[i], rids[i]) << "position " << i << " (score " << rtop[i] << ")";
    }
  }
}

}  // namespace qsa::select_test
