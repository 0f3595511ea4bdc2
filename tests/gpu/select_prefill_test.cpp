// GPU select, prefill path (gpu/select, SelectPath::kPrefill) against the
// decode path and the fp64 reference (reference/select.hpp), on fresh random
// causal chunks: several requests per launch (rows per request 1 .. 300, each
// row at its own position, so V grows along the chunk and crosses K_B),
// padding rows at the end and one between two requests, physical pages
// shuffled, compressed-cache page sizes 16 and 1600 (P / r rows per page).
//  - prefill == decode bit for bit: block ids, block scores and every
//    visible score of the scratch (both paths use one scoring formula, see
//    gpu/select/select.hpp), so the paths agree within any tolerance;
//  - prefill against the reference, per row: every score within
//    tol::gpu_select_score_tol, ids/scores exactly the canonical top-k of the
//    GPU's own scores, tie-aware agreement with qsa::select_rows and
//    identical ids where the reference's neighbours are further apart than
//    the bound (exact ids in the exact-tie case); NaN blocks rank first;
//  - every output element written (outputs and scratch poisoned first);
//  - sweeps: K_B {1, 64, 512, 2048} x r {1, 4, 8, 64} x P {16, 1600}, bf16
//    and fp8 (both flavours) indexer; shapes whose tile holds 16, 3 or 1
//    rows (H_I · d_I up to 4096) and odd H_I / d_I; kAuto's choice.
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
#include "gpu/select/select.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/select.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;
using gpu::SelectLayout;
using gpu::SelectPath;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

enum class Keys { kRandom, kTies, kNan };

struct PrefillCase {
  int budget;  // K_B
  int ratio;   // r
  int page;    // P; rows_per_page = P / r
  int heads;
  int dim;
  IndexerDtype dtype;
  Fp8Flavor flavor;
  std::vector<int> chunk;  // query rows per request
  Keys keys = Keys::kRandom;
};

std::string case_name(const PrefillCase& c) {
  std::string s = "KB" + std::to_string(c.budget) + "_r" + std::to_string(c.ratio) + "_P" + std::to_string(c.page) +
                  "_H" + std::to_string(c.heads) + "_D" + std::to_string(c.dim) + "_";
  if (c.dtype == IndexerDtype::kBf16) s += "bf16";
  else s += c.flavor == Fp8Flavor::kE4m3fnuz ? "fp8fnuz" : "fp8fn";
  s += "_rows";
  for (int n : c.chunk) s += "_" + std::to_string(n);
  if (c.keys == Keys::kTies) s += "_ties";
  if (c.keys == Keys::kNan) s += "_nan";
  return s;
}

void PrintTo(const PrefillCase& c, std::ostream* os) { *os << case_name(c); }

// One step: request i has chunk[i] rows at positions context[i] .. L_i - 1.
struct Step {
  SelectParams p;
  gpu::IndexerCodes codes;
  int rows_per_page = 1;
  int64_t num_pages = 0;
  std::vector<int32_t> token_to_req, visible;
  std::vector<int32_t> first_row, blocks;  // per request: first row, L / r compressed blocks
  TensorI32 table;
  std::vector<uint16_t> q_codes;  // [T, H, d]
  std::vector<uint16_t> k_codes;  // [num_pages * rows_per_page, d]

  int64_t rows() const { return static_cast<int64_t>(token_to_req.size()); }
  int requests() const { return static_cast<int>(first_row.size()); }
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

Step make_step(const PrefillCase& c, uint64_t seed) {
  Step s;
  s.p.heads = c.heads;
  s.p.dim = c.dim;
  s.p.ratio = c.ratio;
  s.p.blocks_budget = c.budget;
  s.p.score_scale = c.keys == Keys::kTies ? 1.0 : 1.0 / std::sqrt(static_cast<double>(c.dim));
  s.codes = {c.dtype, c.flavor};
  s.rows_per_page = c.page / c.ratio;
  const int R = static_cast<int>(c.chunk.size());
  const CounterRng ctx_rng(seed, "select_prefill.context");
  std::vector<int64_t> pages(static_cast<size_t>(R));
  for (int req = 0; req < R; ++req) {
    // Contexts put V = K_B inside the longest chunk, or start from 0.
    const int64_t around = int64_t{c.budget} * c.ratio - c.chunk[req] / 2;
    const int64_t jitter = static_cast<int64_t>(ctx_rng.bits(static_cast<uint64_t>(req)) % 23);
    const int64_t context = req % 3 == 2 ? jitter : std::max<int64_t>(0, around + jitter);
    if (req == 1 && R > 2) s.token_to_req.push_back(-1);  // a padding row between two requests
    s.first_row.push_back(static_cast<int32_t>(s.rows()));
    const int64_t L = context + c.chunk[req];
    for (int o = 0; o < c.chunk[req]; ++o) {
      s.token_to_req.push_back(req);
      s.visible.resize(s.token_to_req.size(), 0);
      s.visible.back() = visible_blocks(context + o, L, c.ratio);
    }
    s.blocks.push_back(static_cast<int32_t>(L / c.ratio));
    pages[req] = (s.blocks.back() + s.rows_per_page - 1) / s.rows_per_page;
  }
  for (int i = 0; i < 3; ++i) s.token_to_req.push_back(-1);  // trailing padding
  s.visible.resize(s.token_to_req.size(), 0);

  int64_t max_pages = 1;
  for (int64_t n : pages) max_pages = std::max(max_pages, n + 1);  // one unmapped column each
  s.num_pages = 2;                                                  // two pages nobody maps
  for (int64_t n : pages) s.num_pages += n;
  std::vector<int32_t> perm(static_cast<size_t>(s.num_pages));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  const CounterRng shuffle(seed, "select_prefill.pages");
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[static_cast<size_t>(shuffle.bits(i) % i)]);
  s.table = TensorI32({R, max_pages}, -1);
  size_t next = 0;
  for (int req = 0; req < R; ++req)
    for (int64_t pg = 0; pg < pages[req]; ++pg) s.table.at(req, pg) = perm[next++];

  const int64_t hd = int64_t{c.heads} * c.dim;
  const CounterRng qrng(seed, "select_prefill.q");
  s.q_codes.resize(static_cast<size_t>(s.rows() * hd));
  for (size_t i = 0; i < s.q_codes.size(); ++i) s.q_codes[i] = s.encode(qrng.normal(i));
  const CounterRng krng(seed, "select_prefill.k");
  s.k_codes.assign(static_cast<size_t>(s.num_pages * s.rows_per_page * c.dim), uint16_t{0});
  for (size_t i = 0; i < s.k_codes.size(); ++i) s.k_codes[i] = s.encode(4.0 * krng.uniform(i) - 2.0);

  if (c.keys == Keys::kTies) {
    // As in select_test: every row shares head 0 of row 0 and every block is
    // c_m * that vector with c_m in {0, 1, 2, 4}, so scores are exactly
    // c_m * L_t (power-of-two scaling is exact): exact ties, levels far apart.
    for (int64_t t = 1; t < s.rows(); ++t) std::copy_n(s.q_codes.begin(), c.dim, s.q_codes.begin() + t * hd);
    const CounterRng level(seed, "select_prefill.level");
    const double scale[4] = {0.0, 1.0, 2.0, 4.0};
    for (int req = 0; req < R; ++req)
      for (int64_t b = 0; b < s.blocks[req]; ++b) {
        const double m = scale[level.bits(static_cast<uint64_t>(req * 1000003 + b)) % 4];
        for (int j = 0; j < c.dim; ++j)
          s.k_codes[static_cast<size_t>(s.cache_row(req, b) * c.dim + j)] = s.encode(m * s.decode(s.q_codes[j]));
      }
  } else if (c.keys == Keys::kNan) {
    for (int req = 0; req < R; ++req)
      for (int64_t b = 3; b < s.blocks[req]; b += 89)
        s.k_codes[static_cast<size_t>(s.cache_row(req, b) * c.dim + b % c.dim)] = s.nan_code();
  }
  return s;
}

struct GpuResult {
  std::vector<int32_t> ids;
  std::vector<float> scores;
  std::vector<float> scratch;  // [T, score_stride]
};

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
GpuResult run_gpu_typed(const Step& s, const SelectLayout& l, SelectPath path) {
  DeviceBuffer<Code> q = upload_codes<Code>(s.q_codes);
  DeviceBuffer<Code> k = upload_codes<Code>(s.k_codes);
  DeviceBuffer<int32_t> req(s.token_to_req), vis(s.visible), table(s.table.data);
  const size_t out_n = static_cast<size_t>(s.rows()) * static_cast<size_t>(s.p.blocks_budget);
  DeviceBuffer<int32_t> ids(out_n);
  DeviceBuffer<float> scores(out_n), scratch(gpu::select_scratch_floats(l));
  ids.poison(gpu::kPoisonId);
  scores.poison(gpu::kPoisonFloat);
  scratch.poison(gpu::kPoisonFloat);
  gpu::launch_select(s.p, s.codes, l, q.get(), k.get(), req.get(), vis.get(), table.get(), scratch.get(), ids.get(),
                     scores.get(), hipStream_t{}, path);
  QSA_GPU_CHECK(hipDeviceSynchronize());
  return {ids.download(), scores.download(), scratch.download()};
}

GpuResult run_gpu(const Step& s, const SelectLayout& l, SelectPath path) {
  if (s.codes.dtype == IndexerDtype::kBf16) return run_gpu_typed<uint16_t>(s, l, path);
  return run_gpu_typed<uint8_t>(s, l, path);
}

struct RefResult {
  TensorI32 ids;
  TensorD top;
  std::vector<std::vector<double>> scores;  // [T][V_t]
  std::vector<std::vector<double>> tol;     // [T][V_t]
};

RefResult run_reference(const Step& s) {
  const int H = s.p.heads, d = s.p.dim;
  TensorD q({s.rows(), H, d});
  for (int64_t i = 0; i < q.numel(); ++i) q.data[i] = s.decode(s.q_codes[i]);
  RefResult r;
  r.scores.resize(static_cast<size_t>(s.rows()));
  r.tol.resize(static_cast<size_t>(s.rows()));
  r.ids = TensorI32({s.rows(), s.p.blocks_budget}, -1);
  r.top = TensorD({s.rows(), s.p.blocks_budget}, kNegInf);
  for (int req = 0; req < s.requests(); ++req) {
    const int64_t t0 = s.first_row[req];
    int64_t t1 = t0;
    while (t1 < s.rows() && s.token_to_req[t1] == req) ++t1;
    TensorD kc({s.blocks[req], d});
    for (int64_t b = 0; b < s.blocks[req]; ++b)
      for (int j = 0; j < d; ++j) kc.at(b, j) = s.decode(s.k_codes[static_cast<size_t>(s.cache_row(req, b) * d + j)]);
    select_rows(s.p, q, s.visible, t0, t1, kc, r.ids, r.top);
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t V = s.visible[t];
      std::vector<double> q_abs(static_cast<size_t>(d), 0.0);  // sum_h |q_hj|
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

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Bit-identical, or both NaN (NaN payloads are not part of the contract).
bool same_bits(float a, float b) { return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b)); }

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// The prefill path's outputs and scratch equal the decode path's.
void expect_paths_identical(const Step& s, const SelectLayout& l, const GpuResult& pre, const GpuResult& dec) {
  const int KB = s.p.blocks_budget;
  int64_t bad = 0;
  for (int64_t t = 0; t < s.rows() && bad < 5; ++t) {
    for (int i = 0; i < KB; ++i) {
      const size_t at = static_cast<size_t>(t * KB + i);
      if (pre.ids[at] != dec.ids[at] || !same_bits(pre.scores[at], dec.scores[at])) {
        ++bad;
        ADD_FAILURE() << "row " << t << " position " << i << ": prefill id " << pre.ids[at] << " score "
                      << pre.scores[at] << ", decode id " << dec.ids[at] << " score " << dec.scores[at];
        break;
      }
    }
    for (int32_t b = 0; b < s.visible[t]; ++b) {
      const size_t at = static_cast<size_t>(t * l.score_stride + b);
      if (!same_bits(pre.scratch[at], dec.scratch[at])) {
        ++bad;
        ADD_FAILURE() << "row " << t << " block " << b << ": prefill score " << pre.scratch[at] << " (0x" << std::hex
                      << bits_of(pre.scratch[at]) << "), decode " << dec.scratch[at] << " (0x"
                      << bits_of(dec.scratch[at]) << std::dec << ")";
        break;
      }
    }
  }
}

// One row of one path against the reference (as select_test's check_row).
void check_row(const Step& s, const RefResult& ref, const GpuResult& g, const SelectLayout& l, int64_t t,
               bool exact_ids) {
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
  for (int32_t b = 0; b < V; ++b) ASSERT_NE(bits_of(scr[b]), gpu::kPoisonFloat) << "score of block " << b;
  int bad = 0;
  for (int32_t b = 0; b < V && bad < 5; ++b) {
    const double r = ref.scores[t][b];
    const double gs = scr[b];
    const bool ok = std::isnan(r) ? std::isnan(gs) : std::fabs(gs - r) <= ref.tol[t][b];
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "score of block " << b << ": gpu " << gs << ", reference " << r << ", tol " << ref.tol[t][b];
  }
  std::vector<double> g64(scr, scr + V);
  std::vector<int32_t> want_ids(static_cast<size_t>(KB));
  std::vector<double> want_top(static_cast<size_t>(KB));
  const int k = top_k_blocks(g64.data(), V, KB, want_ids.data(), want_top.data());
  for (int i = 0; i < KB; ++i) {
    ASSERT_EQ(ids[i], want_ids[i]) << "position " << i << " is not the top-k of the GPU's own scores";
    ASSERT_TRUE(same_value(top[i], want_top[i])) << "position " << i << ": " << top[i] << " vs " << want_top[i];
  }
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

uint64_t case_seed(const std::string& name) { return 0x5e1ec7f11ULL ^ stream_id(name); }

class GpuSelectPrefill : public testing::TestWithParam<PrefillCase> {};

TEST_P(GpuSelectPrefill, MatchesDecodePathAndReference) {
  const PrefillCase& c = GetParam();
  const uint64_t seed = case_seed(case_name(c));
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", case " << case_name(c));
  const Step s = make_step(c, seed);
  const SelectLayout l =
      gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req, s.visible, s.table);
  const GpuResult pre = run_gpu(s, l, SelectPath::kPrefill);
  const GpuResult dec = run_gpu(s, l, SelectPath::kDecode);
  expect_paths_identical(s, l, pre, dec);
  const RefResult ref = run_reference(s);
  for (int64_t t = 0; t < s.rows(); ++t) {
    check_row(s, ref, pre, l, t, c.keys == Keys::kTies);
    if (HasFatalFailure()) return;
  }
}

std::vector<PrefillCase> sweep_cases() {
  struct Shape {
    int heads, dim;
  };
  const Shape shapes[] = {{4, 32}, {4, 128}, {1, 128}, {2, 64}};
  const std::vector<std::vector<int>> chunks = {{300, 1, 37}, {17, 120, 2, 5}, {1, 1, 64}, {16, 300}};
  std::vector<PrefillCase> out;
  int i = 0;
  for (int kb : {1, 64, 512, 2048})
    for (int r : {1, 4, 8, 64})
      for (int page : {16, 1600}) {
        if (page % r != 0) continue;
        const Shape& sh = shapes[i % 4];
        PrefillCase c{kb, r, page, sh.heads, sh.dim, IndexerDtype::kBf16, Fp8Flavor::kE4m3fn, chunks[i % 4]};
        if (i % 3 == 1) c.dtype = IndexerDtype::kFp8;
        if (i % 6 == 4) c.flavor = Fp8Flavor::kE4m3fnuz;
        out.push_back(c);
        ++i;
      }
  return out;
}

std::vector<PrefillCase> special_cases() {
  const auto bf16 = IndexerDtype::kBf16;
  const auto fp8 = IndexerDtype::kFp8;
  const auto fn = Fp8Flavor::kE4m3fn;
  std::vector<PrefillCase> out = {
      // Tiles of 3 rows (H_I d_I = 2048), of 1 row (4096), of 1 row and 3 keys (d_I = 2048).
      {64, 4, 1600, 8, 256, bf16, fn, {40, 7, 300}},
      {512, 1, 16, 16, 256, fp8, fn, {33, 300}},
      {64, 8, 1600, 2, 2048, bf16, fn, {21, 5, 19}},
      // Odd H_I and d_I: a partial head group, odd strides.
      {64, 4, 16, 3, 24, bf16, fn, {300, 9, 1}},
      {512, 8, 1600, 5, 33, fp8, Fp8Flavor::kE4m3fnuz, {150, 150, 3}},
      // Exact ties and NaN blocks through the prefill tiles.
      {64, 4, 1600, 4, 128, bf16, fn, {300, 12, 40}, Keys::kTies},
      {512, 1, 16, 1, 32, fp8, fn, {64, 200, 3}, Keys::kTies},
      {64, 8, 16, 4, 32, bf16, fn, {100, 30, 2}, Keys::kNan},
      {512, 4, 1600, 4, 128, fp8, Fp8Flavor::kE4m3fnEagerNan, {250, 3, 9}, Keys::kNan},
  };
  return out;
}

std::string param_name(const testing::TestParamInfo<PrefillCase>& info) { return case_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Sweep, GpuSelectPrefill, testing::ValuesIn(sweep_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Special, GpuSelectPrefill, testing::ValuesIn(special_cases()), param_name);

// ---- host side: the tile shape and kAuto ------------------------------------

SelectParams params(int heads, int dim) {
  SelectParams p;
  p.heads = heads;
  p.dim = dim;
  p.blocks_budget = 512;
  return p;
}

TEST(GpuSelectPrefillShape, FitsTheSharedBudgetAndTheModel) {
  for (int heads : {1, 2, 3, 4, 8, 16, 64})
    for (int dim : {1, 7, 32, 64, 128, 256, 2048, 4096}) {
      if (int64_t{heads} * dim > gpu::kSelectMaxQueryValues) continue;
      const gpu::SelectPrefillShape s = gpu::select_prefill_shape(params(heads, dim));
      SCOPED_TRACE(testing::Message() << "H_I " << heads << ", d_I " << dim);
      EXPECT_GE(s.rows, 1);
      EXPECT_LE(s.rows, gpu::kSelectPrefillMaxRows);
      EXPECT_GE(s.keys, 1);
      EXPECT_LE(s.keys, gpu::kSelectPrefillMaxKeys);
      EXPECT_GE(s.q_stride, heads * dim);
      EXPECT_GE(s.k_stride, dim);
      EXPECT_LE(s.shared_bytes(), static_cast<size_t>(gpu::kSelectPrefillSharedBytes));
    }
  const gpu::SelectPrefillShape model = gpu::select_prefill_shape(params(4, 128));
  EXPECT_EQ(model.rows, 16);
  EXPECT_EQ(model.keys, 16);
}

TEST(GpuSelectPrefillShape, AutoPicksPrefillForLongChunksOnly) {
  SelectLayout l;
  l.rows = 310;
  l.num_requests = 2;
  l.real_rows = 301;  // a 300-row chunk and a decode row
  EXPECT_EQ(gpu::resolve_select_path(params(4, 128), l, SelectPath::kAuto), SelectPath::kPrefill);
  l.rows = 64;
  l.num_requests = 64;
  l.real_rows = 64;  // decode: one row per request
  EXPECT_EQ(gpu::resolve_select_path(params(4, 128), l, SelectPath::kAuto), SelectPath::kDecode);
  l.rows = 310;
  l.num_requests = 2;
  l.real_rows = 301;  // long chunks, but a tile would hold one row
  EXPECT_EQ(gpu::resolve_select_path(params(16, 256), l, SelectPath::kAuto), SelectPath::kDecode);
  EXPECT_EQ(gpu::resolve_select_path(params(16, 256), l, SelectPath::kPrefill), SelectPath::kPrefill);
  EXPECT_EQ(gpu::resolve_select_path(params(4, 128), l, SelectPath::kDecode), SelectPath::kDecode);
}

TEST(GpuSelectPrefillShape, ValidateCountsRealRows) {
  SelectParams p = params(2, 32);
  TensorI32 table({2, 2}, -1);
  table.at(0, 0) = 0;
  table.at(1, 0) = 1;
  const SelectLayout l = gpu::validate_select(p, {}, 2, 4, {0, 0, 1, -1, -1}, {1, 2, 3, 0, 0}, table);
  EXPECT_EQ(l.rows, 5);
  EXPECT_EQ(l.real_rows, 3);
}

}  // namespace
}  // namespace qsa
