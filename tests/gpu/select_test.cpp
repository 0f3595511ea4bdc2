// GPU select (gpu/select) against the fp64 reference (reference/select.hpp):
//  - phase 1: every visible block's fp32 score (read back from the scratch)
//    within the fp32-accumulation bound of the reference's fp64 score;
//  - phase 2: the ids and scores are exactly qsa::top_k_blocks applied to the
//    GPU's own fp32 scores (so the radix select and the sort are bit-exact);
//  - end to end: tie-aware agreement with qsa::select_rows, and identical ids
//    wherever the reference's scores around a position are further apart
//    than the accumulation bound;
//  - exact ties (duplicated keys) give the lower ids first exactly as the
//    reference; NaN scores rank first; every output element is written;
//  - the element decoders and the sort key, exhaustively against the
//    reference codecs and block_precedes; host-validator rejections.
#include "gpu/select/select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "gpu/select/select_codes.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"
#include "reference/select.hpp"
#include "tests/test_support.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;
using gpu::IndexerCodes;
using gpu::SelectLayout;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

using tol::gpu_select_score_tol;

// How compressed keys are filled.
enum class Keys { kRandom, kTies, kNan };

struct Case {
  int budget;   // K_B
  int visible;  // V of the widest rows
  int heads;
  int dim;
  IndexerDtype dtype;
  Fp8Flavor flavor;
  Keys keys;
};

std::string case_name(const Case& c) {
  std::string s = "KB" + std::to_string(c.budget) + "_V" + std::to_string(c.visible) + "_H" +
                  std::to_string(c.heads) + "_D" + std::to_string(c.dim) + "_";
  if (c.dtype == IndexerDtype::kBf16) s += "bf16";
  else s += c.flavor == Fp8Flavor::kE4m3fnuz ? "fp8fnuz" : "fp8fn";
  if (c.keys == Keys::kTies) s += "_ties";
  if (c.keys == Keys::kNan) s += "_nan";
  return s;
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

// A step of two requests sharing their pages between rows, with padding rows.
struct Scenario {
  SelectParams p;
  IndexerCodes codes;
  int rows_per_page = 48;  // not a power of two: exercises div / mod
  int64_t num_pages = 0;
  std::vector<int32_t> token_to_req, visible;
  TensorI32 table;
  std::vector<uint16_t> q_codes;  // [T, H, d] bf16 bits or fp8 codes
  std::vector<uint16_t> k_codes;  // [num_pages * rows_per_page, d]
  std::vector<std::vector<int32_t>> rows_of_req;

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
};

Scenario make_scenario(const Case& c, uint64_t seed) {
  Scenario s;
  s.p.heads = c.heads;
  s.p.dim = c.dim;
  s.p.blocks_budget = c.budget;
  s.p.score_scale = c.keys == Keys::kTies ? 1.0 : 1.0 / std::sqrt(static_cast<double>(c.dim));
  s.codes = {c.dtype, c.flavor};
  const int V = c.visible;
  // Request 0: decode rows at V, V - 1, V (MTP-like); request 1: two shorter rows.
  s.token_to_req = {0, 0, 0, -1, 1, 1, -1};
  s.visible = {V, std::max(V - 1, 0), V, 0, V / 7, std::min(V, 17), 0};
  s.rows_of_req = {{0, 1, 2}, {4, 5}};
  const int v1 = std::max(V / 7, std::min(V, 17));
  const int64_t pages[2] = {(V + s.rows_per_page - 1) / s.rows_per_page,
                            (v1 + s.rows_per_page - 1) / s.rows_per_page};
  const int64_t max_pages = std::max(pages[0], pages[1]) + 1;  // the last column stays unmapped
  s.num_pages = pages[0] + pages[1] + 3;                          // three pages nobody maps
  // Physical pages: a seeded permutation, so logical neighbours are far apart.
  std::vector<int32_t> perm(static_cast<size_t>(s.num_pages));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  const CounterRng shuffle(seed, "select.pages");
  for (size_t i = perm.size(); i > 1; --i)
    std::swap(perm[i - 1], perm[static_cast<size_t>(shuffle.bits(i) % i)]);
  s.table = TensorI32({2, max_pages}, -1);
  size_t next = 0;
  for (int req = 0; req < 2; ++req)
    for (int64_t pg = 0; pg < pages[req]; ++pg) s.table.at(req, pg) = perm[next++];

  const int64_t hd = int64_t{c.heads} * c.dim;
  const CounterRng qrng(seed, "select.q");
  s.q_codes.resize(static_cast<size_t>(s.rows() * hd));
  for (size_t i = 0; i < s.q_codes.size(); ++i) s.q_codes[i] = s.encode(qrng.normal(i));
  // Keys: uniform in [-2, 2) (cheaper than normals for 10^7 values).
  const CounterRng krng(seed, "select.k");
  s.k_codes.assign(static_cast<size_t>(s.num_pages * s.rows_per_page * c.dim), uint16_t{0});
  for (size_t i = 0; i < s.k_codes.size(); ++i) s.k_codes[i] = s.encode(4.0 * krng.uniform(i) - 2.0);

  if (c.keys == Keys::kTies) {
    // Every block holds c_m * base with c_m in {0, 1, 2, 4} and base = every
    // row's head-0 query (rows share it): scores are exactly c_m * L_t with
    // L_t >= |base|^2 > 0, power-of-two scaling is exact in every format, so
    // duplicated blocks tie exactly on both sides and the levels are far apart.
    for (int64_t t = 1; t < s.rows(); ++t)
      std::copy_n(s.q_codes.begin(), c.dim, s.q_codes.begin() + t * hd);
    const CounterRng level(seed, "select.level");
    for (int req = 0; req < 2; ++req)
      for (int64_t b = 0; b < pages[req] * s.rows_per_page; ++b) {
        const double scale[4] = {0.0, 1.0, 2.0, 4.0};
        const double m = scale[level.bits(static_cast<uint64_t>(req * 1000003 + b)) % 4];
        for (int j = 0; j < c.dim; ++j)
          s.k_codes[static_cast<size_t>(s.cache_row(req, b) * c.dim + j)] = s.encode(m * s.decode(s.q_codes[j]));
      }
  } else if (c.keys == Keys::kNan) {
    // One NaN element in every 97th block of request 0 (eleven of them at V = 1000).
    for (int64_t b = 5; b < V; b += 97)
      s.k_codes[static_cast<size_t>(s.cache_row(0, b) * c.dim + b % c.dim)] = s.nan_code();
  }
  return s;
}

struct GpuResult {
  std::vector<int32_t> ids;
  std::vector<float> scores;
  std::vector<float> scratch;  // [T, score_stride]
};

// The element type the kernel reads: the codes as they are (bf16) or narrowed to bytes (fp8).
template <class Code>
DeviceBuffer<Code> upload_codes(const std::vector<uint16_t>& v) {
  if constexpr (std::is_same_v<Code, uint16_t>) {
    return DeviceBuffer<Code>(v);
  } else {
    std::vector<Code> bytes(v.size());
    for (size_t i = 0; i < v.size(); ++i) bytes[i] = static_cast<Code>(v[i]);
    return DeviceBuffer<Code>(bytes);
  }
}

template <class Code>
GpuResult run_gpu_typed(const Scenario& s, const SelectLayout& l) {
  DeviceBuffer<Code> q = upload_codes<Code>(s.q_codes);
  DeviceBuffer<Code> k = upload_codes<Code>(s.k_codes);
  DeviceBuffer<int32_t> req(s.token_to_req), vis(s.visible), table(s.table.data);
  const size_t out_n = static_cast<size_t>(s.rows()) * static_cast<size_t>(s.p.blocks_budget);
  DeviceBuffer<int32_t> ids(out_n);
  DeviceBuffer<float> scores(out_n), scratch(gpu::select_scratch_floats(l));
  ids.poison(gpu::kPoisonId);
  scores.poison(gpu::kPoisonFloat);
  scratch.poison(gpu::kPoisonFloat);
  gpu::launch_select(s.p, s.codes, l, q.get(), k.get(), req.get(), vis.get(), table.get(), scratch.get(),
                     ids.get(), scores.get(), hipStream_t{});
  QSA_GPU_CHECK(hipDeviceSynchronize());
  return {ids.download(), scores.download(), scratch.download()};
}

GpuResult run_gpu(const Scenario& s, const SelectLayout& l) {
  if (s.codes.dtype == IndexerDtype::kBf16) return run_gpu_typed<uint16_t>(s, l);
  return run_gpu_typed<uint8_t>(s, l);
}

// The reference on the same decoded inputs.
struct RefResult {
  TensorI32 ids;                              // select_rows
  TensorD top;                                // select_rows
  std::vector<std::vector<double>> scores;    // [T][V_t] block_scores_row
  std::vector<std::vector<double>> tol;       // [T][V_t] gpu_select_score_tol
};

RefResult run_reference(const Scenario& s) {
  const int H = s.p.heads, d = s.p.dim;
  TensorD q({s.rows(), H, d});
  for (int64_t i = 0; i < q.numel(); ++i) q.data[i] = s.decode(s.q_codes[i]);
  RefResult r;
  r.scores.resize(static_cast<size_t>(s.rows()));
  r.tol.resize(static_cast<size_t>(s.rows()));
  for (int req = 0; req < 2; ++req) {
    const std::vector<int32_t>& rows = s.rows_of_req[req];
    int32_t max_v = 0;
    for (int32_t t : rows) max_v = std::max(max_v, s.visible[t]);
    TensorD kc({max_v, d});  // the gather of reference/compress.cpp, from codes
    for (int64_t b = 0; b < max_v; ++b)
      for (int j = 0; j < d; ++j) kc.at(b, j) = s.decode(s.k_codes[static_cast<size_t>(s.cache_row(req, b) * d + j)]);
    select_rows(s.p, q, s.visible, rows.front(), rows.back() + 1, kc, r.ids, r.top);
    for (int32_t t : rows) {
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
        r.tol[t][b] = gpu_select_score_tol(std::fabs(s.p.score_scale) * abs_sum, d, H);
      }
    }
  }
  return r;
}

bool same_float_bits(float a, uint32_t bits) {
  uint32_t u;
  std::memcpy(&u, &a, sizeof u);
  return u == bits;
}

// Equal as reported values: both NaN, or equal numbers.
bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// All checks of one row; `exact_ids` demands the reference's ids everywhere
// (scenarios whose ties are exact and whose levels are far apart).
void check_row(const Scenario& s, const RefResult& ref, const GpuResult& g, const SelectLayout& l, int64_t t,
               bool exact_ids) {
  SCOPED_TRACE(testing::Message() << "row " << t << ", V = " << s.visible[t]);
  const int KB = s.p.blocks_budget;
  const int32_t V = s.visible[t];
  const int32_t* ids = g.ids.data() + t * KB;
  const float* top = g.scores.data() + t * KB;
  const float* scr = g.scratch.data() + t * l.score_stride;
  for (int i = 0; i < KB; ++i) {
    ASSERT_NE(static_cast<uint32_t>(ids[i]), gpu::kPoisonId) << "block_ids[" << t << ", " << i << "] not written";
    ASSERT_FALSE(same_float_bits(top[i], gpu::kPoisonFloat)) << "block_scores[" << t << ", " << i << "] not written";
  }
  for (int32_t b = 0; b < V; ++b)
    ASSERT_FALSE(same_float_bits(scr[b], gpu::kPoisonFloat)) << "score of block " << b << " not written";
  // Phase 1: every score within the bound (NaN exactly where the reference has NaN).
  int bad = 0;
  for (int32_t b = 0; b < V && bad < 5; ++b) {
    const double r = ref.scores[t][b];
    const double gs = scr[b];
    const bool ok = std::isnan(r) ? std::isnan(gs) : std::fabs(gs - r) <= ref.tol[t][b];
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "score of block " << b << ": gpu " << gs << ", reference " << r << ", tol "
                    << ref.tol[t][b];
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
  std::vector<char> chosen(static_cast<size_t>(V), 0);
  for (int i = 0; i < k; ++i) chosen[ids[i]] = 1;
  double tol_max = 0.0;
  for (double x : ref.tol[t]) tol_max = std::max(tol_max, x);
  // No unselected block may beat a selected one by more than both bounds.
  double sel_upper = std::numeric_limits<double>::infinity(), unsel_lower = kNegInf;
  bool sel_number = false, unsel_nan = false;
  for (int32_t b = 0; b < V; ++b) {
    const double r = ref.scores[t][b];
    if (chosen[b]) {
      if (!std::isnan(r)) {
        sel_number = true;
        sel_upper = std::min(sel_upper, r + ref.tol[t][b]);
      }
    } else {
      if (std::isnan(r)) unsel_nan = true;
      else unsel_lower = std::max(unsel_lower, r - ref.tol[t][b]);
    }
  }
  EXPECT_FALSE(unsel_nan && sel_number) << "a NaN-scored block lost to a number";
  EXPECT_LE(unsel_lower, sel_upper) << "an unselected block beats a selected one beyond the fp32 bound";
  // Identical ids where the reference's neighbours sit further apart than 2 bounds
  // (the (k+1)-th is the best block the reference left out); NaN positions exactly.
  double next_out = kNegInf;
  std::vector<char> ref_chosen(static_cast<size_t>(V), 0);
  for (int i = 0; i < k; ++i) ref_chosen[rids[i]] = 1;
  for (int32_t b = 0; b < V; ++b)
    if (!ref_chosen[b]) next_out = std::max(next_out, ref.scores[t][b]);
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

class GpuSelect : public testing::TestWithParam<Case> {};

TEST_P(GpuSelect, MatchesReference) {
  const Case& c = GetParam();
  const uint64_t seed = 0x5e1ec7000ULL + static_cast<uint64_t>(c.budget) * 131u + static_cast<uint64_t>(c.visible) +
                        static_cast<uint64_t>(c.heads * 7 + c.dim) * 1000003u;
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", case " << case_name(c));
  const Scenario s = make_scenario(c, seed);
  const SelectLayout l = gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req,
                                              s.visible, s.table);
  const GpuResult g = run_gpu(s, l);
  const RefResult ref = run_reference(s);
  for (int64_t t = 0; t < s.rows(); ++t) {
    check_row(s, ref, g, l, t, c.keys == Keys::kTies);
    if (HasFatalFailure()) return;
  }
}

std::vector<Case> sweep_cases() {
  struct Combo { int heads, dim; IndexerDtype dtype; };
  const Combo combos[] = {{1, 32, IndexerDtype::kBf16}, {4, 128, IndexerDtype::kBf16},
                          {1, 128, IndexerDtype::kFp8}, {4, 32, IndexerDtype::kFp8}};
  std::vector<Case> out;
  for (int kb : {1, 4, 512, 2048}) {
    std::vector<int> vs = {0, 1, kb - 1, kb, kb + 1, 3000, 40000};
    std::sort(vs.begin(), vs.end());
    vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
    for (int v : vs)
      for (const Combo& m : combos) {
        // 40000 blocks only at d_I = 32 (the d_I = 128 path is covered at 3000
        // and by the tie cases at 40000): keeps the host-side reference short.
        if (v == 40000 && m.dim == 128) continue;
        out.push_back({kb, v, m.heads, m.dim, m.dtype, Fp8Flavor::kE4m3fn, Keys::kRandom});
      }
  }
  return out;
}

std::vector<Case> special_cases() {
  const auto bf16 = IndexerDtype::kBf16;
  const auto fp8 = IndexerDtype::kFp8;
  const auto fn = Fp8Flavor::kE4m3fn;
  return {
      // Exact ties: 4 levels over thousands of blocks; the cut falls inside a level.
      {4, 3000, 4, 128, bf16, fn, Keys::kTies},
      {512, 3000, 1, 32, bf16, fn, Keys::kTies},
      {2048, 2100, 4, 32, fp8, fn, Keys::kTies},
      {2048, 40000, 4, 128, bf16, fn, Keys::kTies},
      {2048, 40000, 1, 128, fp8, fn, Keys::kTies},
      // NaN blocks rank first, in id order; more NaNs than K_B at K_B = 4.
      {4, 1000, 4, 128, bf16, fn, Keys::kNan},
      {512, 1000, 1, 32, bf16, fn, Keys::kNan},
      {512, 3000, 4, 32, fp8, fn, Keys::kNan},
      {4, 1000, 4, 32, fp8, Fp8Flavor::kE4m3fnuz, Keys::kNan},
      // The other fp8 flavours on random keys.
      {512, 3000, 4, 128, fp8, Fp8Flavor::kE4m3fnuz, Keys::kRandom},
      {2048, 3000, 4, 32, fp8, Fp8Flavor::kE4m3fnEagerNan, Keys::kRandom},
  };
}

std::string param_name(const testing::TestParamInfo<Case>& info) { return case_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Sweep, GpuSelect, testing::ValuesIn(sweep_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Special, GpuSelect, testing::ValuesIn(special_cases()), param_name);

// ---- element decoders and the sort key (host side of select_codes.hpp) ----

bool same_decoded(float got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return static_cast<double>(got) == want && std::signbit(got) == std::signbit(want);
}

TEST(GpuSelectCodes, Bf16DecodesEveryCode) {
  for (uint32_t c = 0; c < 0x10000u; ++c)
    ASSERT_TRUE(same_decoded(gpu::select_detail::decode_code<gpu::select_detail::CodeKind::kBf16>(c),
                             bf16_value(static_cast<uint16_t>(c))))
        << "bf16 code 0x" << std::hex << c;
}

TEST(GpuSelectCodes, Fp8DecodesEveryCode) {
  using gpu::select_detail::CodeKind;
  const auto fp8_fn_to_float = [](uint32_t c) { return gpu::select_detail::decode_code<CodeKind::kFp8Fn>(c); };
  const auto fp8_fnuz_to_float = [](uint32_t c) { return gpu::select_detail::decode_code<CodeKind::kFp8Fnuz>(c); };
  for (uint32_t c = 0; c < 0x100u; ++c) {
    const auto code = static_cast<uint8_t>(c);
    ASSERT_TRUE(same_decoded(fp8_fn_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fn))) << "e4m3fn 0x" << std::hex << c;
    ASSERT_TRUE(same_decoded(fp8_fn_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fnEagerNan)))
        << "e4m3fn (eager NaN) 0x" << std::hex << c;
    ASSERT_TRUE(same_decoded(fp8_fnuz_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fnuz)))
        << "e4m3fnuz 0x" << std::hex << c;
  }
}

TEST(GpuSelectCodes, ReluKeepsNan) {
  using gpu::select_detail::relu_keep_nan;
  EXPECT_TRUE(std::isnan(relu_keep_nan(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(relu_keep_nan(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(relu_keep_nan(-2.5f), 0.0f);
  EXPECT_FALSE(std::signbit(relu_keep_nan(-0.0f)));
  EXPECT_EQ(relu_keep_nan(3.0f), 3.0f);
}

// Key order (larger = earlier) must be block_precedes on every pair of
// special and ordinary scores and ids, -0 == +0 and all NaNs equal included.
TEST(GpuSelectCodes, KeyOrderIsCanonical) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1.0f, -1.0f, 1e-42f, -1e-42f,
                               std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(), 0.5f, 0.50000006f};
  const CounterRng rng(0x5e1ec7ULL, "select.key");
  for (uint64_t i = 0; i < 40; ++i) scores.push_back(static_cast<float>(rng.normal(i)));
  const uint32_t ids[] = {0u, 1u, 7u, 40000u, 0x7FFFFFFEu};
  for (float a : scores)
    for (uint32_t ia : ids)
      for (float b : scores)
        for (uint32_t ib : ids) {
          if (ia == ib) continue;
          const bool key_first = gpu::select_detail::select_key(a, ia) > gpu::select_detail::select_key(b, ib);
          ASSERT_EQ(key_first, block_precedes(a, static_cast<int32_t>(ia), b, static_cast<int32_t>(ib)))
              << a << "#" << ia << " vs " << b << "#" << ib;
        }
  for (uint32_t id : ids) EXPECT_EQ(gpu::select_detail::select_key_id(gpu::select_detail::select_key(1.0f, id)), id);
}

// ---- host validation ------------------------------------------------------

struct ValidInput {
  SelectParams p;
  IndexerCodes codes;
  int64_t num_pages = 6;
  int rows_per_page = 4;
  std::vector<int32_t> token_to_req = {0, 0, 1, -1};
  std::vector<int32_t> visible = {8, 9, 4, 0};
  TensorI32 table = TensorI32({2, 4}, -1);
  ValidInput() {
    p.heads = 2;
    p.dim = 32;
    p.blocks_budget = 4;
    table.at(0, 0) = 5;
    table.at(0, 1) = 0;
    table.at(0, 2) = 3;  // blocks 8..11 of request 0
    table.at(1, 0) = 1;
  }
  SelectLayout validate() const {
    return gpu::validate_select(p, codes, num_pages, rows_per_page, token_to_req, visible, table);
  }
};

std::string validate_error(const ValidInput& in) { return test::input_error_message([&] { in.validate(); }); }

TEST(GpuSelectValidate, AcceptsValidInputAndSizesTheScratch) {
  const SelectLayout l = ValidInput().validate();
  EXPECT_EQ(l.rows, 4);
  EXPECT_EQ(l.num_requests, 2);
  EXPECT_EQ(l.max_pages, 4);
  EXPECT_EQ(l.max_visible, 9);
  EXPECT_EQ(l.score_stride, 9);
  EXPECT_EQ(gpu::select_scratch_floats(l), 36u);
}

TEST(GpuSelectValidate, RejectsBadRows) {
  ValidInput in;
  in.token_to_req[1] = 2;
  EXPECT_NE(validate_error(in).find("token_to_req[1] = 2"), std::string::npos);
  in = ValidInput();
  in.token_to_req[0] = -2;
  EXPECT_NE(validate_error(in).find("token_to_req[0] = -2"), std::string::npos);
  in = ValidInput();
  in.visible[2] = -1;
  EXPECT_NE(validate_error(in).find("visible_blocks[2] = -1"), std::string::npos);
  in = ValidInput();
  in.visible[3] = 1;
  EXPECT_NE(validate_error(in).find("padding row 3"), std::string::npos);
  in = ValidInput();
  in.visible.pop_back();
  EXPECT_NE(validate_error(in).find("visible_blocks has 3 entries"), std::string::npos);
}

TEST(GpuSelectValidate, RejectsBadTables) {
  ValidInput in;
  in.table.at(1, 3) = 6;  // an unused column, still checked
  EXPECT_NE(validate_error(in).find("block_table_c[1, 3] = 6"), std::string::npos);
  in = ValidInput();
  in.table.at(0, 3) = -2;
  EXPECT_NE(validate_error(in).find("block_table_c[0, 3] = -2"), std::string::npos);
  // A visible block on an unmapped page, as gather_compressed_keys rejects it.
  in = ValidInput();
  in.table.at(0, 1) = -1;
  EXPECT_NE(validate_error(in).find("its page 1 is unmapped"), std::string::npos);
  // More visible blocks than the table has pages for.
  in = ValidInput();
  in.visible[0] = 17;
  EXPECT_NE(validate_error(in).find("block_table_c has 4 columns"), std::string::npos);
  in = ValidInput();
  in.table = TensorI32({8}, 0);
  EXPECT_NE(validate_error(in).find("expected [R, max_pages]"), std::string::npos);
}

TEST(GpuSelectValidate, RejectsParamsBeyondTheKernel) {
  ValidInput in;
  in.p.blocks_budget = gpu::kSelectMaxBlocksBudget + 1;
  EXPECT_THROW(in.validate(), ConfigError);
  in = ValidInput();
  in.p.blocks_budget = 0;
  EXPECT_THROW(in.validate(), ConfigError);
  in = ValidInput();
  in.p.heads = 64;
  in.p.dim = 128;  // 8192 query values > kSelectMaxQueryValues
  EXPECT_THROW(in.validate(), ConfigError);
}

TEST(GpuSelectValidate, LauncherRejectsInconsistentLayouts) {
  const ValidInput in;
  SelectLayout l = in.validate();
  l.score_stride = l.max_visible - 1;
  EXPECT_THROW(gpu::launch_select(in.p, in.codes, l, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, hipStream_t{}),
               InputError);
  l = in.validate();  // consistent, but the pointers are missing
  EXPECT_THROW(gpu::launch_select(in.p, in.codes, l, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, hipStream_t{}),
               InputError);
}

}  // namespace
}  // namespace qsa
