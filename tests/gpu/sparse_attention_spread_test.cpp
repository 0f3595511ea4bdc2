// The spread decode kernel (AttentionPath::kDecodeSpread;
// sparse_attention_mma.hpp) against the reference on the fresh random steps
// of sparse_attention_case.hpp (a decode row, a two-row chunk with one row
// attending nothing, a padding row, an unmapped page, invalid ids):
//  - sweep: D {64, 128, 256} x G {1, 2} x H/G {1, 12, 16} x ids {37,
//    2051} x count column off/on, and one row of one id, engine profile
//    (bf16 P), bf16 cache: the bounds of tests/tolerances.hpp, every output
//    written (poisoned first); the same launch given each id's cache slot
//    (SparseAttentionArgs::token_slots) gives the same bits;
//  - Q past f16's range both ways, bf16 logits and sigmoid;
//  - one decode row: kAuto takes this kernel (the same bits), 65 blocks per
//    KV group on an H200-class device, merged after their barrier; rows of
//    4100 ids (two or three tiles per block); rows past the 128 pages whose
//    table entries the kernel keeps in registers; the split-K kernel on the
//    same row (kDecodeSplitK); many launches in a row on one stream (the
//    barrier counters flip, never reset), and counters reused by launches
//    of another block count; an earlier launch's partials,
//    left in the workspace, never merged by a later one, on one stream and
//    in the replays of a captured graph;
//  - unaligned gate and outputs give the aligned run's bits; two runs give
//    the same bits; the workspace holds the kernel's partials where kAuto
//    may take it;
//  - where it cannot run (an fp8 cache, unrounded P), kDecodeSpread is a
//    ConfigError, never another kernel's result; where its blocks can
//    never all be resident, the launch fails instead of hanging.
// Skipped where the kernel cannot run (an AMD build, or a case whose
// blocks do not fit the device at once or whose workspace holds too few).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/common/selftest.hpp"
#include "reference/core/errors.hpp"
#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/gpu/sparse_attention_run.hpp"

namespace qsa {
namespace {

using gpu::AttentionPath;
using gpu_test::AttnSpec;

// Whether kDecodeSpread runs case c on this device, with the workspace
// sparse_attention_workspace_floats gives it (as run_gpu_path allocates).
bool spread_runs(const gpu_test::AttnCase& c) {
  const int64_t T = c.layout.num_tokens;
  gpu::SparseAttentionDims dims;
  dims.num_tokens = T;
  const size_t floats = gpu::sparse_attention_workspace_floats(c.params, dims, gpu::kSpreadIdsPerBlock);
  return gpu::spread_attention_size(c.params, c.kv_params.dtype, T, AttentionPath::kDecodeSpread, floats) > 0;
}

class GpuSparseAttentionSpread : public testing::TestWithParam<AttnSpec> {};

TEST_P(GpuSparseAttentionSpread, MatchesReference) {
  const AttnSpec& s = GetParam();
  const uint64_t seed = gpu_test::case_seed(gpu_test::spec_name(s));
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED)");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(s, seed);
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const gpu_test::GpuOutputs by_id =
      gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr, gpu::kSpreadIdsPerBlock);
  gpu_test::expect_matches_reference(c, by_id);
  // With slots the kernel reads neither the request nor the table (the case's
  // padding row, unmapped page and invalid ids come as -1 slots).
  gpu_test::expect_same_bits(by_id, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr,
                                                           gpu::kSpreadIdsPerBlock, false, 1,
                                                           gpu_test::Repeat::kPoisoned, {}, true));
}

// The sweep's cases have several rows, so their workspace (sized for splits
// of kSpreadIdsPerBlock ids) holds the kernel's partials only where a row
// has more than one split: rows of one id are OneIdRow's (one row, whose
// workspace always holds the kernel's blocks).
std::vector<AttnSpec> sweep() {
  std::vector<AttnSpec> out;
  for (int dim : {64, 128, 256})
    for (int kv_heads : {1, 2})
      for (int group : {1, 12, 16})
        for (int n : {37, 2051})
          for (bool count : {false, true}) {
            AttnSpec s;
            s.dim = dim;
            s.kv_heads = kv_heads;
            s.group = group;
            s.ids = n;
            s.count = count;
            s.profile = PrecisionProfile::kEngine;
            out.push_back(s);
          }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Engine, GpuSparseAttentionSpread, testing::ValuesIn(sweep()), gpu_test::param_name);

std::vector<AttnSpec> knobs() {
  std::vector<AttnSpec> out;
  for (int q_exponent : {17, -24}) {
    AttnSpec s;
    s.dim = 256;
    s.group = 12;
    s.ids = 2051;
    s.count = true;
    s.profile = PrecisionProfile::kEngine;
    s.q_exponent = q_exponent;
    out.push_back(s);
  }
  AttnSpec k;
  k.dim = 256;
  k.group = 12;
  k.ids = 300;
  k.profile = PrecisionProfile::kEngine;
  k.round_logits = true;
  k.round_sigmoid = true;
  out.push_back(k);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Knobs, GpuSparseAttentionSpread, testing::ValuesIn(knobs()), gpu_test::param_name);

// The model's decode row: D 256, G 2, H/G 12, 2051 counted ids.
AttnSpec one_row(int ids) {
  AttnSpec s;
  s.dim = 256;
  s.kv_heads = 2;
  s.group = 12;
  s.ids = ids;
  s.count = true;
  s.one_row = true;
  s.profile = PrecisionProfile::kEngine;
  return s;
}

// kAuto takes the spread kernel for one row (2 pairs), with 65 blocks of 32
// ids per KV group on a device of 130+ SMs; the split-K kernel, no longer
// kAuto's choice there, stays correct on the same row.
TEST(GpuSparseAttentionSpreadRow, OneRowTakesTheSpreadKernel) {
  const uint64_t seed = gpu_test::case_seed("spread-one-row");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(2051), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  ASSERT_EQ(c.layout.num_tokens, 1);
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const int size = gpu::spread_attention_size(c.params, KvDtype::kBf16, 1);
  EXPECT_GE(size, 1);
  EXPECT_LE(2 * size, gpu::device_limits().multiprocessors);  // at most a block per SM
  if (gpu::device_limits().multiprocessors >= 130) {
    EXPECT_EQ(size, 65);
  }
  const gpu_test::GpuOutputs spread = gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr);
  gpu_test::expect_matches_reference(c, spread);
  gpu_test::expect_same_bits(spread, gpu_test::run_gpu(c));
  // Given the slots (as the step's expand writes them), kAuto's launch too.
  gpu_test::expect_same_bits(spread, gpu_test::run_gpu_path(c, AttentionPath::kAuto, nullptr,
                                                            gpu::kDefaultIdsPerSplit, false, 1,
                                                            gpu_test::Repeat::kPoisoned, {}, true));
  // Deterministic: a second run gives the same bits.
  gpu_test::expect_same_bits(spread, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr));
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSplitK, nullptr));
}

// 4100 ids over (on an H200) 66 blocks: 64 ids, two tiles per block (the
// running max and the rescale between tiles).
TEST(GpuSparseAttentionSpreadRow, SeveralTilesPerBlock) {
  const uint64_t seed = gpu_test::case_seed("spread-tiles");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(4100), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr));
}

// 9000 ids over pages of 64 tokens: the row has 143 pages, and the kernel
// holds a row's first 128 block-table entries in registers (kTableRegs), so
// ids on pages 128-142 take the lookup in memory; five tiles per block.
TEST(GpuSparseAttentionSpreadRow, PagesPastTheRegisterTable) {
  const uint64_t seed = gpu_test::case_seed("spread-many-pages");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(9000), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  ASSERT_GT(c.layout.block_table.shape[1], 128);
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const gpu_test::GpuOutputs by_id = gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr);
  gpu_test::expect_matches_reference(c, by_id);
  gpu_test::expect_same_bits(by_id, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr,
                                                           gpu::kDefaultIdsPerSplit, false, 1,
                                                           gpu_test::Repeat::kPoisoned, {}, true));
}

// 200 launches on one stream, the workspace NaN before each: every one
// waits for all its blocks' partials (a merge before the barrier would read
// NaN), and the barrier counters, taken from the ring and left flipped,
// never need a reset.
TEST(GpuSparseAttentionSpreadRow, RepeatedLaunchesGiveTheSameBits) {
  const uint64_t seed = gpu_test::case_seed("spread-repeat");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(2051), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const auto once = gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr);
  gpu_test::expect_matches_reference(c, once);
  gpu_test::expect_same_bits(
      once, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, false, 200));
}

// Launches that leave their partials in the workspace for the next: every
// one but the last with the queries negated, five replays of one captured
// graph (whose kernel arguments, the barrier counters included, are the
// same every time), then five launches on one stream. A merge that passed
// its barrier before all of its launch's partials landed would take an
// earlier launch's, which are numbers, not NaN, and give neither the
// reference's result nor the same bits. Run alone, the capture holds the
// process's first spread launch (which must need no setup call).
TEST(GpuSparseAttentionSpreadRow, EarlierLaunchesPartialsAreNeverTaken) {
  const uint64_t seed = gpu_test::case_seed("spread-stale");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(2051), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  std::vector<gpu_test::GpuOutputs> runs;
  for (const gpu_test::Repeat repeat : {gpu_test::Repeat::kGraph, gpu_test::Repeat::kStale}) {
    SCOPED_TRACE(repeat == gpu_test::Repeat::kStale ? "one stream" : "graph replays");
    runs.push_back(
        gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, false, 5, repeat));
    gpu_test::expect_matches_reference(c, runs.back());
  }
  gpu_test::expect_same_bits(runs[0], runs[1]);
  gpu_test::expect_same_bits(runs[0], gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr));
}

// The kernel's ring of barrier counters comes round every 32768 one-row
// launches (2 pairs each) to counters that earlier launches used: 20000
// launches of a 37-id row (2 blocks per KV group), then 20000 of a
// 2051-id row (65 on an H200), which reuse the first set's counters. Each
// barrier adds 2^31 to its counter whatever its block count, so the second
// set's barriers still open once all their blocks arrive, never before
// (the workspace is NaN before each launch) and never not at all.
TEST(GpuSparseAttentionSpreadRow, CountersReusedByAnotherBlockCount) {
  const uint64_t seed = gpu_test::case_seed("spread-counter-reuse");
  const gpu_test::AttnCase few = gpu_test::make_attn_case(one_row(37), seed);
  const gpu_test::AttnCase row = gpu_test::make_attn_case(one_row(2051), seed + 1);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED)");
  if (!spread_runs(few) || !spread_runs(row)) GTEST_SKIP() << "the spread kernel does not run this case here";
  EXPECT_LT(gpu::spread_attention_size(few.params, KvDtype::kBf16, 1),
            gpu::spread_attention_size(row.params, KvDtype::kBf16, 1));
  gpu_test::GpuOutputs few_out;
  const gpu_test::GpuOutputs row_out = gpu_test::run_gpu_path(
      row, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, false, 20000, gpu_test::Repeat::kPoisoned,
      [&] {
        few_out = gpu_test::run_gpu_path(few, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, false,
                                         20000);
      });
  gpu_test::expect_matches_reference(few, few_out);
  gpu_test::expect_matches_reference(row, row_out);
}

// One row of one id: one block per KV group, which still meets its barrier.
TEST(GpuSparseAttentionSpreadRow, OneIdRow) {
  const uint64_t seed = gpu_test::case_seed("spread-one-id");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(1), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  EXPECT_EQ(gpu::spread_attention_size(c.params, KvDtype::kBf16, 1), 1);
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr));
}

// A launch whose blocks can never all be resident: with all but 30 SMs
// held by spinning blocks on a non-blocking stream (selftest.hpp's
// hold_multiprocessors, for at most 60 s), the kernel's resident blocks
// poll their barrier until they give up (2^24 polls, seconds) and trap, so
// the launch fails with an error instead of hanging. The SMs are taken
// only after run_gpu_path's uploads and poisoning, whose device-wide
// synchronisations would otherwise wait for the holding blocks. A trap
// ends the CUDA context, so the launch runs in a child process: a death
// test in the "threadsafe" style, which re-executes the test binary for it.
TEST(GpuSparseAttentionSpreadRowDeathTest, ABarrierThatNeverOpensFailsInsteadOfHanging) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#else
  testing::FLAGS_gtest_death_test_style = "threadsafe";
#endif
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(2051), gpu_test::case_seed("spread-never-opens"));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const int held = gpu::device_limits().multiprocessors - 30;
  ASSERT_GT(held, 0);
  EXPECT_EXIT(
      {
        hipStream_t other = nullptr;
        QSA_GPU_CHECK(hipStreamCreateWithFlags(&other, hipStreamNonBlocking));
        gpu::DeviceBuffer<int> release(1);
        release.zero();
        const auto hold = [&] {
          gpu::hold_multiprocessors(held, release.get(), 60.0, other);
          std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the held blocks are resident
        };
        try {
          gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, false, 1,
                                 gpu_test::Repeat::kPoisoned, hold);
        } catch (const InternalError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(3);
        }
        std::_Exit(0);
      },
      testing::ExitedWithCode(3), "GPU call failed");
}

// Up to kSpreadDecodeMaxPairs (row, KV group) pairs the workspace holds
// the spread kernel's partials (one block per kSpreadIdsPerBlock ids), past
// that only the split-K kernel's; with less, kAuto takes as many blocks as
// it holds.
TEST(GpuSparseAttentionSpreadRow, WorkspaceHoldsTheKernelsBlocks) {
  const gpu_test::AttnCase row = gpu_test::make_attn_case(one_row(2051), 1);
  gpu::SparseAttentionDims dims;
  dims.num_tokens = 1;
  const size_t per_split = static_cast<size_t>(row.params.heads) * (row.params.head_dim + 2);
  EXPECT_EQ(gpu::spread_workspace_floats_per_block(row.params, 1), per_split);
  EXPECT_EQ(gpu::sparse_attention_workspace_floats(row.params, dims), 65 * per_split);
  EXPECT_EQ(gpu::sparse_attention_workspace_floats(row.params, dims, 256), 65 * per_split);
  if (gpu::device_limits().multiprocessors >= 130) {
    EXPECT_EQ(gpu::spread_attention_size(row.params, KvDtype::kBf16, 1, AttentionPath::kAuto, 65 * per_split), 65);
  }
  const int fewer = gpu::spread_attention_size(row.params, KvDtype::kBf16, 1, AttentionPath::kAuto, 40 * per_split);
  EXPECT_GE(fewer, 1);
  EXPECT_LE(fewer, 40);
  EXPECT_EQ(gpu::spread_attention_size(row.params, KvDtype::kBf16, 1, AttentionPath::kAuto, per_split - 1), 0);
  const gpu_test::AttnCase one = gpu_test::make_attn_case(one_row(1), 1);
  EXPECT_EQ(gpu::sparse_attention_workspace_floats(one.params, dims), per_split);
  dims.num_tokens = 2;  // 4 pairs: the split-K kernel's 33 splits of 64 ids
  EXPECT_EQ(gpu::sparse_attention_workspace_floats(row.params, dims), 2 * 33 * per_split);
  EXPECT_EQ(gpu::sparse_attention_workspace_floats(one.params, dims), 0u);
}

// The gate and the outputs need no alignment beyond their element's.
TEST(GpuSparseAttentionSpreadRow, MisalignedOutputsGiveTheAlignedBits) {
  const uint64_t seed = gpu_test::case_seed("spread-misaligned");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(one_row(2051), seed);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(c.spec));
  if (!spread_runs(c)) GTEST_SKIP() << "the spread kernel does not run this case here";
  const auto aligned = gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr);
  const auto shifted =
      gpu_test::run_gpu_path(c, AttentionPath::kDecodeSpread, nullptr, gpu::kDefaultIdsPerSplit, true);
  gpu_test::expect_same_bits(aligned, shifted);
}

// Forced where it does not apply, the path fails instead of running another
// kernel.
TEST(GpuSparseAttentionSpreadRow, RefusesWhatItDoesNotImplement) {
  AttnSpec fp8 = one_row(300);
  fp8.kv = KvDtype::kFp8;
  EXPECT_THROW(gpu_test::run_gpu_path(gpu_test::make_attn_case(fp8, 1), AttentionPath::kDecodeSpread, nullptr),
               ConfigError);
  AttnSpec exact = one_row(300);
  exact.profile = PrecisionProfile::kExact;  // P not rounded to bf16
  EXPECT_THROW(gpu_test::run_gpu_path(gpu_test::make_attn_case(exact, 1), AttentionPath::kDecodeSpread, nullptr),
               ConfigError);
}

}  // namespace
}  // namespace qsa
