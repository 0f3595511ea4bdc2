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
// The scenario plumbing and the per-row checks against the reference are
// shared with select_test: tests/gpu/select_case.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/select/select.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "tests/gpu/select_case.hpp"

namespace qsa {
namespace {

using gpu::SelectLayout;
using gpu::SelectPath;
using select_test::bits_of;
using select_test::GpuResult;
using select_test::Keys;
using select_test::RefResult;
using select_test::Scenario;

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
                  "_H" + std::to_string(c.heads) + "_D" + std::to_string(c.dim) + "_" +
                  select_test::codes_name(c.dtype, c.flavor) + "_rows";
  for (int n : c.chunk) s += "_" + std::to_string(n);
  return s + select_test::keys_name(c.keys);
}

void PrintTo(const PrefillCase& c, std::ostream* os) { *os << case_name(c); }

// One step: request i has chunk[i] rows at positions context[i] .. L_i - 1.
Scenario make_step(const PrefillCase& c, uint64_t seed) {
  Scenario s = select_test::scenario_for(c.heads, c.dim, c.budget, c.dtype, c.flavor, c.keys);
  s.p.ratio = c.ratio;
  s.rows_per_page = c.page / c.ratio;
  const int R = static_cast<int>(c.chunk.size());
  const CounterRng ctx_rng(seed, "select_prefill.context");
  std::vector<int64_t> blocks, pages(static_cast<size_t>(R));  // per request: L / r compressed blocks, their pages
  for (int req = 0; req < R; ++req) {
    // Contexts put V = K_B inside the longest chunk, or start from 0.
    const int64_t around = int64_t{c.budget} * c.ratio - c.chunk[req] / 2;
    const int64_t jitter = static_cast<int64_t>(ctx_rng.bits(static_cast<uint64_t>(req)) % 23);
    const int64_t context = req % 3 == 2 ? jitter : std::max<int64_t>(0, around + jitter);
    if (req == 1 && R > 2) s.token_to_req.push_back(-1);  // a padding row between two requests
    const int64_t L = context + c.chunk[req];
    for (int o = 0; o < c.chunk[req]; ++o) {
      s.token_to_req.push_back(req);
      s.visible.resize(s.token_to_req.size(), 0);
      s.visible.back() = visible_blocks(context + o, L, c.ratio);
    }
    blocks.push_back(L / c.ratio);
    pages[req] = (blocks.back() + s.rows_per_page - 1) / s.rows_per_page;
  }
  for (int i = 0; i < 3; ++i) s.token_to_req.push_back(-1);  // trailing padding
  s.visible.resize(s.token_to_req.size(), 0);

  int64_t max_pages = 1;
  for (int64_t n : pages) max_pages = std::max(max_pages, n + 1);  // one unmapped column each
  s.num_pages = 2;                                                  // two pages nobody maps
  for (int64_t n : pages) s.num_pages += n;
  select_test::map_shuffled_pages(s, pages, max_pages, seed, "select_prefill");
  select_test::fill_random_codes(s, seed, "select_prefill");

  if (c.keys == Keys::kTies) {
    select_test::make_exact_ties(s, blocks, seed, "select_prefill");
  } else if (c.keys == Keys::kNan) {
    for (int req = 0; req < R; ++req)
      for (int64_t b = 3; b < blocks[req]; b += 89) s.set_nan_block(req, b);
  }
  return s;
}

// Bit-identical, or both NaN (NaN payloads are not part of the contract).
bool same_bits(float a, float b) { return bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b)); }

// The prefill path's outputs and scratch equal the decode path's.
void expect_paths_identical(const Scenario& s, const SelectLayout& l, const GpuResult& pre, const GpuResult& dec) {
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

uint64_t case_seed(const std::string& name) { return 0x5e1ec7f11ULL ^ stream_id(name); }

class GpuSelectPrefill : public testing::TestWithParam<PrefillCase> {};

TEST_P(GpuSelectPrefill, MatchesDecodePathAndReference) {
  const PrefillCase& c = GetParam();
  const uint64_t seed = case_seed(case_name(c));
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", case " << case_name(c));
  const Scenario s = make_step(c, seed);
  const SelectLayout l =
      gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req, s.visible, s.table);
  const GpuResult pre = select_test::run_gpu(s, l, SelectPath::kPrefill);
  const GpuResult dec = select_test::run_gpu(s, l, SelectPath::kDecode);
  expect_paths_identical(s, l, pre, dec);
  const RefResult ref = select_test::run_reference(s);
  for (int64_t t = 0; t < s.rows(); ++t) {
    select_test::check_row(s, ref, pre, l, t, c.keys == Keys::kTies);
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
