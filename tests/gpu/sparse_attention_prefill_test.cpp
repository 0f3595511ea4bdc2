// GPU sparse attention + gate, prefill path (AttentionPath::kPrefill,
// gpu/attention/sparse_attention_plan.hpp) against the reference
// (reference/attention.hpp, gate.hpp) and against the decode path, on fresh
// random prefill steps (sparse_attention_case.hpp, make_prefill_attn_case):
// several requests with rows per request 1 .. 300 plus two padding rows, page
// sizes 16 and 1600, and index rows that are
//  - realistic: the reference's select + expand on the causal chunk, whose
//    neighbouring rows overlap heavily (K_B {1, 64, 512, 2048} x r {1, 4, 8,
//    64} wherever K = K_B r <= 4096);
//  - adversarial: disjoint per 16 rows, duplicated ids (the reference counts
//    each copy), -1 holes, ids past seq_len or below -1, ids on an unmapped
//    page, random count bounds, a row attending nothing, junk in padding rows.
// Checks, element by element on A and O = bf16(A sigmoid(gate)) (outputs
// poisoned first, so every element must be written): prefill within
// tol::gpu_attention_prefill_fp32_tol (+ the knobs' terms), decode within its
// own bound, prefill vs decode within the sum of both
// (tol::gpu_attention_path_agreement_tol), rows attending nothing exactly 0 on
// both paths. Head dims {64, 128, 256} (and 32), H/G {1, 2, 4, 12, 24, 80}
// (80: two head chunks), bf16 / fp8 KV in both flavours, engine and exact
// knobs, bf16 logits and sigmoid, count column on and off.
// Host checks: the plan (tiles, multiset union, masks) and kAuto.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu/common/device_limits.hpp"
#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/gpu/sparse_attention_run.hpp"

namespace qsa {
namespace {

using gpu::AttentionPath;
using gpu_test::IdSet;
using gpu_test::PrefillAttnSpec;

// Every row's ids in the plan (the entries whose mask has its bit) are, as a
// multiset, exactly the ids the reference attends: counted columns, in
// [0, L), on a mapped page, each as often as the row lists it.
void expect_plan_matches_rows(const gpu_test::AttnCase& c, const gpu::SparseAttentionPrefillPlan& plan) {
  const AttentionParams& p = c.params;
  std::vector<char> covered(static_cast<size_t>(c.layout.num_tokens), 0);
  for (int64_t t = 0; t < plan.num_tiles(); ++t) {
    const int32_t* tile = &plan.tiles[static_cast<size_t>(4 * t)];
    const int req = c.layout.token_to_req[tile[0]];
    for (int32_t r = 0; r < tile[1]; ++r) {
      const int64_t row = tile[0] + r;
      ASSERT_FALSE(covered[static_cast<size_t>(row)]) << "row " << row << " lies in two tiles";
      covered[static_cast<size_t>(row)] = 1;
      ASSERT_EQ(c.layout.token_to_req[row], req) << "tile " << t << " mixes requests at row " << row;
      std::vector<int32_t> want, got;
      if (req >= 0) {
        const int32_t* ids = c.token_idx.row(row);
        const int64_t n = p.count_column ? std::clamp<int64_t>(ids[p.index_width - 1], 0, p.index_width - 1)
                                         : p.index_width;
        for (int64_t col = 0; col < n; ++col)
          if (ids[col] >= 0 && ids[col] < c.layout.seq_lens[req] &&
              paged_slot(c.layout.block_table, req, ids[col], p.page_size) >= 0)
            want.push_back(ids[col]);
      }
      for (int32_t e = tile[2]; e < tile[2] + tile[3]; ++e)
        if ((plan.masks[static_cast<size_t>(e)] >> r) & 1u) got.push_back(plan.ids[static_cast<size_t>(e)]);
      std::sort(want.begin(), want.end());
      ASSERT_TRUE(std::is_sorted(got.begin(), got.end())) << "tile " << t << " entries are not ascending";
      ASSERT_EQ(got, want) << "row " << row << ": the plan's ids differ from the ids the reference attends";
    }
  }
  for (size_t row = 0; row < covered.size(); ++row) ASSERT_TRUE(covered[row]) << "row " << row << " lies in no tile";
}

std::string param_name(const testing::TestParamInfo<PrefillAttnSpec>& info) {
  return gpu_test::prefill_spec_name(info.param);
}

class GpuSparseAttentionPrefill : public testing::TestWithParam<PrefillAttnSpec> {};

TEST_P(GpuSparseAttentionPrefill, MatchesReferenceAndDecodePath) {
  const PrefillAttnSpec& s = GetParam();
  const std::string name = gpu_test::prefill_spec_name(s);
  const uint64_t seed = gpu_test::case_seed(name);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED), case " << name);
  const gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, seed);
  const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
  expect_plan_matches_rows(c, plan);
  if (HasFatalFailure()) return;
  const gpu_test::GpuOutputs decode = gpu_test::run_gpu_path(c, AttentionPath::kDecode, nullptr);
  for (const AttentionPath path : {AttentionPath::kPrefill, AttentionPath::kPrefillMmaSync}) {
    SCOPED_TRACE(path == AttentionPath::kPrefill ? "kPrefill" : "kPrefillMmaSync");
    gpu_test::expect_prefill_matches(c, decode, gpu_test::run_gpu_path(c, path, &plan), plan);
  }
}

PrefillAttnSpec spec(int dim, int kv_heads, int group, int kb, int r, int page, std::vector<int> chunk,
                     IdSet ids = IdSet::kRealistic) {
  PrefillAttnSpec s;
  s.attn.dim = dim;
  s.attn.kv_heads = kv_heads;
  s.attn.group = group;
  s.blocks_budget = kb;
  s.ratio = r;
  s.page = page;
  s.chunk = std::move(chunk);
  s.ids = ids;
  return s;
}

// Realistic rows over K_B x r (K = K_B r <= 4096), cycling head dims, group
// sizes, page sizes, KV dtypes, knobs and the count column.
std::vector<PrefillAttnSpec> realistic_sweep() {
  const std::vector<std::vector<int>> chunks = {{300, 1, 37}, {17, 120, 2, 5}, {1, 64}, {16, 300}};
  const int dims[] = {64, 128, 256};
  const int groups[] = {1, 4, 12, 2};
  std::vector<PrefillAttnSpec> out;
  int i = 0;
  for (int kb : {1, 64, 512, 2048})
    for (int r : {1, 4, 8, 64}) {
      if (int64_t{kb} * r > 4096) continue;
      PrefillAttnSpec s = spec(dims[i % 3], 1 + i % 2, groups[i % 4], kb, r, r == 64 || i % 2 ? 1600 : 16,
                               chunks[i % 4]);
      s.attn.count = i % 2 == 0;
      s.attn.profile = i % 3 == 2 ? PrecisionProfile::kExact : PrecisionProfile::kEngine;
      if (i % 4 == 1) s.attn.kv = KvDtype::kFp8;
      if (i % 8 == 5) s.attn.flavor = Fp8Flavor::kE4m3fnuz;
      out.push_back(s);
      ++i;
    }
  return out;
}

std::vector<PrefillAttnSpec> special_cases() {
  std::vector<PrefillAttnSpec> out;
  // The released model's attention shape: D 256, G 2, H/G 12 (5-row tiles).
  out.push_back(spec(256, 2, 12, 512, 4, 1600, {300, 1, 37}));
  out.back().attn.count = true;
  // Two head chunks per group (H/G 80 > 64 pairs), and 24 heads in 2-row tiles.
  out.push_back(spec(64, 1, 80, 64, 8, 16, {20, 7}));
  out.back().attn.profile = PrecisionProfile::kExact;
  out.push_back(spec(128, 1, 24, 64, 4, 16, {45, 3}));
  // D 32 and the hf-eager-style knobs the kernel supports.
  out.push_back(spec(32, 2, 2, 64, 4, 16, {100, 9}));
  PrefillAttnSpec knobs = spec(128, 2, 4, 512, 4, 16, {150, 150, 3});
  knobs.attn.round_logits = true;
  knobs.attn.round_sigmoid = true;
  out.push_back(knobs);
  // Disjoint rows: the largest unions a tile can have.
  out.push_back(spec(128, 2, 4, 64, 4, 16, {300, 5}, IdSet::kDisjoint));
  out.back().attn.count = true;
  out.push_back(spec(64, 1, 1, 512, 1, 1600, {40, 17}, IdSet::kDisjoint));
  out.back().attn.profile = PrecisionProfile::kExact;
  // Duplicated ids: each copy is one softmax term, as in the reference.
  out.push_back(spec(64, 2, 4, 64, 4, 1600, {40, 17}, IdSet::kDuplicates));
  out.back().attn.count = true;
  out.back().attn.profile = PrecisionProfile::kExact;
  out.push_back(spec(256, 2, 12, 64, 8, 16, {33}, IdSet::kDuplicates));
  out.back().attn.kv = KvDtype::kFp8;
  out.push_back(spec(128, 1, 1, 2048, 1, 16, {16, 1}, IdSet::kDuplicates));
  // Holes, out-of-range ids, an unmapped page, count bounds, junk padding.
  out.push_back(spec(128, 2, 4, 512, 4, 16, {300, 1, 37}, IdSet::kHoles));
  out.back().attn.count = true;
  out.push_back(spec(64, 1, 1, 64, 1, 1600, {64, 16}, IdSet::kHoles));
  out.back().attn.profile = PrecisionProfile::kExact;
  out.push_back(spec(256, 2, 12, 64, 64, 1600, {120, 4, 9}, IdSet::kHoles));
  out.back().attn.count = true;
  out.back().attn.kv = KvDtype::kFp8;
  out.back().attn.flavor = Fp8Flavor::kE4m3fnuz;
  return out;
}

INSTANTIATE_TEST_SUITE_P(Realistic, GpuSparseAttentionPrefill, testing::ValuesIn(realistic_sweep()), param_name);
INSTANTIATE_TEST_SUITE_P(Special, GpuSparseAttentionPrefill, testing::ValuesIn(special_cases()), param_name);

// kAuto on a prefill step with a plan: by shape alone it is the prefill
// path; with the params, the tensor-core decode kernel wins wherever the
// build has it for them (CUDA, bf16-unnormalised P) unless a tensor-core
// prefill kernel exists for them too and the plan's reuse reaches
// sparse_attention_prefill_min_reuse. Either way kAuto gives the resolved path's
// result, bit for bit.
TEST(GpuSparseAttentionPrefillPath, AutoTakesTheResolvedPathOnPrefillSteps) {
  for (const PrecisionProfile profile : {PrecisionProfile::kEngine, PrecisionProfile::kExact}) {
    PrefillAttnSpec s = spec(128, 2, 4, 64, 4, 16, {64, 40});
    s.attn.profile = profile;
    const uint64_t seed = gpu_test::case_seed("prefill-auto");
    SCOPED_TRACE(testing::Message() << "seed " << seed << ", profile " << static_cast<int>(profile));
    const gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, seed);
    const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
    gpu::SparseAttentionArgs with_plan;
    with_plan.prefill_tiles = plan.tiles.data();  // only compared with null here
    with_plan.prefill_num_tiles = plan.num_tiles();
    with_plan.prefill_num_entries = plan.num_entries();
    with_plan.prefill_row_ids = plan.row_ids;
    const gpu::SparseAttentionDims dims = gpu_test::validate_case(c);
    ASSERT_EQ(gpu::resolve_attention_path(dims, with_plan, AttentionPath::kAuto), AttentionPath::kPrefill);
    const KvDtype kv = c.kv_params.dtype;
    const AttentionPath resolved = gpu::resolve_attention_path(c.params, kv, dims, with_plan, AttentionPath::kAuto);
    const double reuse_ratio = static_cast<double>(plan.row_ids) / static_cast<double>(plan.num_entries());
    const bool reuse = reuse_ratio >= gpu::sparse_attention_prefill_min_reuse(c.params, kv);
    const bool prefill = !gpu::tensor_core_attention_available(c.params) ||
                         (reuse && gpu::tensor_core_prefill_available(c.params, kv));
    EXPECT_EQ(resolved, prefill ? AttentionPath::kPrefill : AttentionPath::kDecode) << "reuse " << reuse_ratio;
    const gpu_test::GpuOutputs autos = gpu_test::run_gpu_path(c, AttentionPath::kAuto, &plan);
    const gpu_test::GpuOutputs chosen = gpu_test::run_gpu_path(c, resolved, &plan);
    EXPECT_TRUE(autos.attn == chosen.attn && autos.gated == chosen.gated);
    gpu_test::expect_matches_reference(c, autos);
  }
}

// Where the tensor-core decode kernel exists, kAuto takes the prefill path
// exactly when the plan's rows attend at least sparse_attention_prefill_min_reuse
// ids per entry its tiles load and a tensor-core prefill kernel exists for
// the cache's dtype: never for fp8, whose prefill kernel is the portable
// one (host logic: no launch).
TEST(GpuSparseAttentionPrefillPath, AutoTakesPrefillOnlyWhereThePlanSharesEnough) {
  AttentionParams p;
  p.kv_heads = 2;
  p.heads = 24;
  p.head_dim = 256;
  p.page_size = 1600;
  p.p_rounding = PRounding::kBf16Unnormalized;  // the engines' P, the tensor-core kernels'
  if (!gpu::tensor_core_attention_available(p)) GTEST_SKIP() << "no tensor-core decode kernel in this build";
  gpu::SparseAttentionDims dims;
  dims.num_tokens = 100;
  gpu::SparseAttentionArgs a;
  int32_t tile[4] = {};
  a.prefill_tiles = tile;  // only compared with null here
  a.prefill_num_tiles = 20;  // 5 rows per tile
  a.prefill_num_entries = 1000;
  const double need = gpu::sparse_attention_prefill_min_reuse(p, KvDtype::kBf16) * 1000;
  for (const int64_t ids : {int64_t{0}, static_cast<int64_t>(need) - 1, static_cast<int64_t>(need), int64_t{5000}}) {
    a.prefill_row_ids = ids;
    EXPECT_EQ(gpu::resolve_attention_path(p, KvDtype::kBf16, dims, a, AttentionPath::kAuto),
              static_cast<double>(ids) >= need ? AttentionPath::kPrefill : AttentionPath::kDecode)
        << ids << " row ids over 1000 entries";
    EXPECT_EQ(gpu::resolve_attention_path(p, KvDtype::kFp8, dims, a, AttentionPath::kAuto), AttentionPath::kDecode)
        << ids << " row ids over 1000 entries, fp8 cache";
  }
  a.prefill_num_tiles = 30;  // fewer than kAttentionPrefillMinRowsPerTile rows per tile: decode whatever the reuse
  EXPECT_EQ(gpu::resolve_attention_path(p, KvDtype::kBf16, dims, a, AttentionPath::kAuto), AttentionPath::kDecode);
}

// On a compute capability 9.0 device with sm_90a code (the H200 build),
// kPrefill runs the Hopper kernel and kPrefillMmaSync the sm_80 one: both
// match the reference (above), and their fp32 sums run in different orders,
// so some output bits differ. Equal outputs would mean kPrefill fell back.
// kAuto measures reuse against the Hopper kernel's threshold there.
TEST(GpuSparseAttentionPrefillPath, PrefillTakesTheHopperKernelOnHopper) {
  const gpu::DeviceLimits& d = gpu::device_limits();
  if (d.major != 9 || d.minor != 0) GTEST_SKIP() << "not a compute capability 9.0 device";
  const PrefillAttnSpec s = spec(256, 2, 12, 512, 4, 1600, {300, 1, 37});
  const uint64_t seed = gpu_test::case_seed("prefill-hopper");
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, seed);
  const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
  const gpu_test::GpuOutputs hopper = gpu_test::run_gpu_path(c, AttentionPath::kPrefill, &plan);
  const gpu_test::GpuOutputs sm80 = gpu_test::run_gpu_path(c, AttentionPath::kPrefillMmaSync, &plan);
  ASSERT_EQ(hopper.attn.size(), sm80.attn.size());
  int64_t differ = 0;
  for (size_t i = 0; i < hopper.attn.size(); ++i) differ += hopper.attn[i] != sm80.attn[i];
  EXPECT_GT(differ, 0) << "kPrefill and kPrefillMmaSync gave the same bits: the Hopper kernel did not run";
  // kAuto's reuse threshold is the Hopper kernel's here, except for fp8 (no tensor-core prefill kernel).
  EXPECT_EQ(gpu::sparse_attention_prefill_min_reuse(c.params, KvDtype::kBf16), gpu::kAttentionPrefillMinReuseHopper);
  EXPECT_EQ(gpu::sparse_attention_prefill_min_reuse(c.params, KvDtype::kFp8), gpu::kAttentionPrefillMinReuse);
}

// A V row holding inf, attended by some rows of a request and not by their
// neighbours in the same tiles. The tensor-core prefill kernel multiplies
// P = 0 by that row for the neighbours, and must recompute them exactly
// (sparse_attention_mma.hpp): the reference lets a row see only the ids it
// attends. The neighbours match the reference as usual; the rows that
// attend it are not finite exactly where the reference is not, on both
// paths.
TEST(GpuSparseAttentionPrefillNonFinite, AnInfInAVRowReachesOnlyTheRowsThatAttendIt) {
  const PrefillAttnSpec s = spec(256, 2, 12, 64, 4, 16, {60, 9});
  const std::string name = gpu_test::prefill_spec_name(s) + "_inf_v";
  const uint64_t seed = gpu_test::case_seed(name);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED), case " << name);
  gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, seed);
  const AttentionParams& p = c.params;
  const int64_t T = c.layout.num_tokens;
  // Which rows of request 0 list each id; the first id that some but not all
  // of them list becomes the poisoned token.
  const int64_t begin = c.layout.row_begin(0), end = c.layout.row_end(0);
  const int64_t L = c.layout.seq_lens[0];
  std::vector<std::vector<char>> lists(static_cast<size_t>(L), std::vector<char>(static_cast<size_t>(T), 0));
  for (int64_t row = begin; row < end; ++row)
    for (int64_t col = 0; col < p.index_width; ++col) {
      const int32_t id = c.token_idx.at(row, col);
      if (id >= 0 && id < L) lists[static_cast<size_t>(id)][static_cast<size_t>(row)] = 1;
    }
  // The plan does not depend on the cache: the poisoned id is the first that
  // a tile of request 0 holds for some of its rows and not for others.
  const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
  int32_t poisoned = -1;
  for (int32_t id = 0; id < L && poisoned < 0; ++id)
    for (int64_t t = 0; t < plan.num_tiles() && poisoned < 0; ++t) {
      const int32_t* tile = &plan.tiles[static_cast<size_t>(4 * t)];
      if (tile[0] < begin || tile[0] >= end) continue;
      int n = 0;
      for (int32_t r = 0; r < tile[1]; ++r) n += lists[static_cast<size_t>(id)][static_cast<size_t>(tile[0] + r)];
      if (n > 0 && n < tile[1]) poisoned = id;
    }
  ASSERT_GE(poisoned, 0) << "no id that only some rows of a tile attend";
  const int64_t slot = paged_slot(c.layout.block_table, 0, poisoned, p.page_size);
  ASSERT_GE(slot, 0);
  const int G = p.kv_heads, D = p.head_dim;
  std::vector<double> k(static_cast<size_t>(G) * D), v(k.size());
  for (int g = 0; g < G; ++g)
    for (int d = 0; d < D; ++d) {
      k[static_cast<size_t>(g * D + d)] = c.cache.k(slot, g)[d];
      v[static_cast<size_t>(g * D + d)] = c.cache.v(slot, g)[d];
    }
  v[3] = std::numeric_limits<double>::infinity();  // group 0, dim 3
  c.cache.write(slot, poisoned, k.data(), v.data());
  // The rows that attend it: their reference now has inf or NaN; c keeps the
  // reference of the clean cache, which is the same for every other row.
  TensorD poisoned_attn, poisoned_gated;
  sparse_attention(p, c.q, c.token_idx, c.layout, c.cache, poisoned_attn);
  apply_gate(c.gate_params, poisoned_attn, c.gate, poisoned_gated);
  const std::vector<char>& attends = lists[static_cast<size_t>(poisoned)];

  const gpu_test::GpuOutputs decode = gpu_test::run_gpu_path(c, AttentionPath::kDecode, nullptr);
  for (const AttentionPath path : {AttentionPath::kPrefill, AttentionPath::kPrefillMmaSync}) {
    SCOPED_TRACE(path == AttentionPath::kPrefill ? "kPrefill" : "kPrefillMmaSync");
    const gpu_test::GpuOutputs prefill = gpu_test::run_gpu_path(c, path, &plan);
    gpu_test::expect_prefill_matches(c, decode, prefill, plan, &attends);
    int64_t non_finite = 0, checked = 0;
    for (int64_t row = begin; row < end; ++row) {
      if (!attends[static_cast<size_t>(row)]) continue;
      for (int64_t i = row * p.heads * D; i < (row + 1) * p.heads * D; ++i) {
        const bool want = std::isfinite(poisoned_attn.data[static_cast<size_t>(i)]);
        non_finite += want ? 0 : 1;
        ++checked;
        const size_t at = static_cast<size_t>(i);
        ASSERT_EQ(std::isfinite(prefill.attn[at]), want) << "prefill, row " << row << " element " << i;
        ASSERT_EQ(std::isfinite(decode.attn[at]), want) << "decode, row " << row << " element " << i;
      }
    }
    EXPECT_GT(non_finite, 0) << "the poisoned V row reached no output of the " << checked << " checked";
  }
}

// ---- host side -------------------------------------------------------------

TEST(GpuSparseAttentionPrefillPlan, ShapeFitsTheKernel) {
  for (int group : {1, 2, 3, 4, 12, 16, 24, 64, 80, 200}) {
    AttentionParams p;
    p.kv_heads = 2;
    p.heads = 2 * group;
    p.head_dim = 128;
    p.page_size = 16;
    const gpu::SparseAttentionPrefillShape sh = gpu::sparse_attention_prefill_shape(p);
    SCOPED_TRACE(testing::Message() << "H/G " << group);
    EXPECT_GE(sh.rows, 1);
    EXPECT_LE(sh.rows, gpu::kAttentionPrefillMaxRows);
    EXPECT_LE(sh.pairs, gpu::kAttentionPrefillMaxPairs);
    EXPECT_EQ(sh.pairs, sh.rows * sh.heads);
    EXPECT_GE(sh.heads * sh.head_chunks, group);
    EXPECT_LT(sh.heads * (sh.head_chunks - 1), group);
  }
  AttentionParams model;
  model.kv_heads = 2;
  model.heads = 24;
  model.head_dim = 256;
  model.page_size = 1600;
  const gpu::SparseAttentionPrefillShape sh = gpu::sparse_attention_prefill_shape(model);
  EXPECT_EQ(sh.heads, 12);
  EXPECT_EQ(sh.rows, 5);
}

// A hand-made step: two requests (5 and 2 rows) and a padding row, with
// duplicates, an id past seq_len, a -1 hole, an id on an unmapped page and a
// count bound.
TEST(GpuSparseAttentionPrefillPlan, TilesHoldTheMultisetUnionOfTheirRows) {
  AttentionParams p;
  p.kv_heads = 1;
  p.heads = 16;  // H/G 16: 4 rows per tile
  p.head_dim = 64;
  p.page_size = 4;
  p.count_column = true;
  p.index_width = 5;
  const std::vector<int32_t> t2r = {0, 0, 0, 0, 0, 1, 1, -1};
  const std::vector<int32_t> seq_lens = {12, 6};
  TensorI32 table({2, 3}, -1);
  table.at(0, 0) = 0;
  table.at(0, 1) = -1;  // ids 4..7 of request 0 are unmapped
  table.at(0, 2) = 1;
  table.at(1, 0) = 2;
  table.at(1, 1) = 3;
  TensorI32 idx({8, 5}, -1);
  const int32_t rows[8][5] = {
      {3, 3, 9, 4, 4},     // 3 twice, 9, 4 (unmapped); count 4
      {9, 3, -1, 12, 3},   // 9, 3, -1, 12 (past L); count 3 (12 not counted)
      {0, 0, 0, 11, 4},    // 0 three times, 11
      {11, 2, 2, 2, 0},    // count 0: nothing
      {1, 8, 1, 8, 4},     // the fifth row of request 0: a tile of its own
      {5, 0, 5, -1, 3},    // request 1
      {0, 6, 0, 0, 4},     // 6 = L: skipped
      {1, 2, 3, 4, 4},     // padding: ignored
  };
  for (int r = 0; r < 8; ++r)
    for (int col = 0; col < 5; ++col) idx.at(r, col) = rows[r][col];
  gpu::SparseAttentionDims dims;
  dims.num_tokens = 8;
  dims.num_reqs = 2;
  dims.max_pages = 3;
  dims.num_pages = 4;
  const gpu::SparseAttentionPrefillPlan plan = gpu::plan_sparse_attention_prefill(p, dims, idx, t2r, seq_lens, table);
  ASSERT_EQ(plan.rows_per_tile, 4);
  // Rows 0-3 (request 0), row 4 (request 0, a full tile before it), rows 5-6
  // (request 1), row 7 (padding, no entries).
  EXPECT_EQ(plan.tiles, (std::vector<int32_t>{0, 4, 0, 7, 4, 1, 7, 4, 5, 2, 11, 5, 7, 1, 16, 0}));
  // Tile 0: 0 three times (row 2), 3 twice (row 0) and once (row 1), 9 (rows
  // 0 and 1), 11 (row 2); 4 (unmapped), 12 (past L), -1 and row 1's column
  // past its count are gone. Tile 1: 1 and 8 twice. Tile 2: 0 once in row 5
  // and three times in row 6, 5 twice in row 5; 6 (= L) is gone.
  EXPECT_EQ(plan.ids, (std::vector<int32_t>{0, 0, 0, 3, 3, 9, 11, 1, 1, 8, 8, 0, 0, 0, 5, 5}));
  EXPECT_EQ(plan.masks, (std::vector<uint32_t>{0b100, 0b100, 0b100, 0b011, 0b001, 0b011, 0b100, 1, 1, 1, 1, 0b11,
                                               0b10, 0b10, 0b01, 0b01}));
  EXPECT_EQ(plan.row_ids, 19);  // the masks' bits: 9 + 4 + 6
}

TEST(GpuSparseAttentionPrefillPlan, LauncherRejectsAMissingOrForeignPlan) {
  const PrefillAttnSpec s = spec(64, 2, 4, 64, 4, 16, {20, 3});
  const gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, gpu_test::case_seed("prefill-reject"));
  const gpu::SparseAttentionDims dims = gpu_test::validate_case(c);
  gpu::SparseAttentionArgs a;  // no plan
  EXPECT_THROW(gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, dims, a, nullptr,
                                            gpu::kDefaultIdsPerSplit, AttentionPath::kPrefill),
               InputError);
  EXPECT_EQ(gpu::resolve_attention_path(dims, a, AttentionPath::kAuto), AttentionPath::kDecode);
  const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
  a.prefill_tiles = plan.tiles.data();
  a.prefill_ids = plan.ids.data();
  a.prefill_masks = plan.masks.data();
  a.prefill_num_tiles = plan.num_tiles();
  a.prefill_num_entries = plan.num_entries();
  a.prefill_rows_per_tile = plan.rows_per_tile + 1;  // built for other params
  EXPECT_THROW(gpu::launch_sparse_attention(c.params, c.gate_params, c.kv_params, dims, a, nullptr,
                                            gpu::kDefaultIdsPerSplit, AttentionPath::kPrefill),
               InputError);
  // A decode batch (one row per tile) stays on the decode path under kAuto.
  a.prefill_num_tiles = dims.num_tokens;
  EXPECT_EQ(gpu::resolve_attention_path(dims, a, AttentionPath::kAuto), AttentionPath::kDecode);
}

}  // namespace
}  // namespace qsa
