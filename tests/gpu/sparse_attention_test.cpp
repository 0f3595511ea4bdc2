// GPU sparse attention + gate (gpu/attention) against the reference
// (reference/attention.hpp, gate.hpp) on fresh random steps: a decode row, a
// two-row chunk (one row attending nothing), a padding row, one unmapped
// page, and index rows mixing attended ids with -1, ids past seq_len, ids
// below -1 and ids on the unmapped page (sparse_attention_case.hpp).
//  - Engine sweep (bf16 P, bf16 A): D {64, 256} x G {1, 2} x H/G {1, 12} x
//    ids {1, 37, 2051} x count column off/on: A within the fp32 bound plus
//    the bf16-P bound and one bf16 store, O within that times sigmoid plus a
//    bf16 store (tests/tolerances.hpp); zero rows exactly 0; every output
//    element written (poisoned first).
//  - Exact-knob sweep (no P or A rounding): the same shapes with the fp32
//    bound alone, sharp enough to notice one dropped or extra id in 2051.
//  - Coverage: D 32 and 128, H/G 2 and 24 (two head chunks per group), fp8
//    KV in both flavours (the tensor-core fp8 path at D 64, 128 and 256),
//    Q past f16's range both ways (that path holds Q in f16), bf16 logits
//    and sigmoid (smoke tests of the knobs).
//  - Split-K: the same long rows with splits of 32 to 1024 ids and one
//    split, all within the fp32 bound of the reference; the engine profile
//    through both decode kernels at several split sizes; one decode row
//    alone (the shape where the tensor-core kernel splits a row the most).
//  - Every spec also through the portable decode kernel (kDecodePortable),
//    since kDecode takes the tensor-core kernel where it applies.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/common/device_limits.hpp"
#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/gpu/sparse_attention_run.hpp"

namespace qsa {
namespace {

using gpu_test::AttnSpec;

class GpuSparseAttention : public testing::TestWithParam<AttnSpec> {};

TEST_P(GpuSparseAttention, MatchesReference) {
  const AttnSpec& s = GetParam();
  const uint64_t seed = gpu_test::case_seed(gpu_test::spec_name(s));
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED)");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(s, seed);
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c));
}

// kDecode takes the tensor-core kernel where the build has one (CUDA, bf16
// P, H/G <= 16); the portable kernel must stay correct on the same inputs.
TEST_P(GpuSparseAttention, PortableKernelMatchesReference) {
  const AttnSpec& s = GetParam();
  const uint64_t seed = gpu_test::case_seed(gpu_test::spec_name(s));
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED)");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(s, seed);
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, gpu::AttentionPath::kDecodePortable, nullptr));
}

std::vector<AttnSpec> sweep(PrecisionProfile profile, std::vector<int> ids, std::vector<bool> counts) {
  std::vector<AttnSpec> out;
  for (int dim : {64, 256})
    for (int kv_heads : {1, 2})
      for (int group : {1, 12})
        for (int n : ids)
          for (bool count : counts) {
            AttnSpec s;
            s.dim = dim;
            s.kv_heads = kv_heads;
            s.group = group;
            s.ids = n;
            s.count = count;
            s.profile = profile;
            out.push_back(s);
          }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Engine, GpuSparseAttention,
                         testing::ValuesIn(sweep(PrecisionProfile::kEngine, {1, 37, 2051}, {false, true})),
                         gpu_test::param_name);
INSTANTIATE_TEST_SUITE_P(ExactKnobs, GpuSparseAttention,
                         testing::ValuesIn(sweep(PrecisionProfile::kExact, {37, 2051}, {false})), gpu_test::param_name);

std::vector<AttnSpec> coverage() {
  std::vector<AttnSpec> out;
  auto add = [&](int dim, int kv_heads, int group, int ids, PrecisionProfile profile) -> AttnSpec& {
    AttnSpec s;
    s.dim = dim;
    s.kv_heads = kv_heads;
    s.group = group;
    s.ids = ids;
    s.profile = profile;
    out.push_back(s);
    return out.back();
  };
  add(32, 2, 2, 300, PrecisionProfile::kExact);
  add(128, 1, 24, 300, PrecisionProfile::kExact).count = true;
  add(128, 2, 4, 2051, PrecisionProfile::kEngine).kv = KvDtype::kFp8;
  AttnSpec& fnuz = add(128, 2, 4, 37, PrecisionProfile::kEngine);
  fnuz.kv = KvDtype::kFp8;
  fnuz.flavor = Fp8Flavor::kE4m3fnuz;
  add(64, 2, 4, 300, PrecisionProfile::kExact).kv = KvDtype::kFp8;
  // The tensor-core kernel's fp8 path at each head dim's fragment layout
  // (8-byte V loads at D 64), AMD's flavour at D 256, and Q beyond f16's
  // range both ways in both caches.
  add(64, 2, 4, 300, PrecisionProfile::kEngine).kv = KvDtype::kFp8;
  add(256, 2, 12, 2051, PrecisionProfile::kEngine).kv = KvDtype::kFp8;
  AttnSpec& fnuz256 = add(256, 1, 12, 300, PrecisionProfile::kEngine);
  fnuz256.kv = KvDtype::kFp8;
  fnuz256.flavor = Fp8Flavor::kE4m3fnuz;
  for (KvDtype kv : {KvDtype::kBf16, KvDtype::kFp8})
    for (int q_exponent : {17, -24}) {
      AttnSpec& range = add(256, 2, 12, 2051, PrecisionProfile::kEngine);
      range.kv = kv;
      range.count = true;
      range.q_exponent = q_exponent;
    }
  AttnSpec& knobs = add(256, 2, 12, 300, PrecisionProfile::kEngine);
  knobs.round_logits = true;
  knobs.round_sigmoid = true;
  return out;
}

INSTANTIATE_TEST_SUITE_P(Coverage, GpuSparseAttention, testing::ValuesIn(coverage()), gpu_test::param_name);

// Rows of 2051 ids with a count column, G = 2.
AttnSpec long_rows(int dim, int group, PrecisionProfile profile) {
  AttnSpec s;
  s.dim = dim;
  s.kv_heads = 2;
  s.group = group;
  s.ids = 2051;
  s.count = true;
  s.profile = profile;
  return s;
}

TEST(GpuSparseAttentionSplits, EverySplitSizeMatchesReference) {
  const uint64_t seed = gpu_test::case_seed("splits");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(long_rows(128, 4, PrecisionProfile::kExact), seed);
  for (int ids_per_split : {32, 64, 128, 256, 1024, 2176}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << ", ids_per_split " << ids_per_split);
    gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c, ids_per_split));
  }
}

// The engine profile (bf16 P) through both decode kernels: the tensor-core
// kernel picks at most the caller's split count (one split with 2176 ids,
// its direct-store epilogue), the portable one exactly that count.
TEST(GpuSparseAttentionSplits, EngineKernelsMatchReferenceAtEverySplitSize) {
  const uint64_t seed = gpu_test::case_seed("engine-splits");
  const gpu_test::AttnCase c = gpu_test::make_attn_case(long_rows(256, 12, PrecisionProfile::kEngine), seed);
  for (auto path : {gpu::AttentionPath::kDecode, gpu::AttentionPath::kDecodePortable})
    for (int ids_per_split : {32, 64, 128, 256, 512, 1024, 2176}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << ", ids_per_split " << ids_per_split << ", path "
                                      << (path == gpu::AttentionPath::kDecode ? "decode" : "portable"));
      gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, path, nullptr, ids_per_split));
    }
}

// The tensor-core kernel's split count: at least 1, never more than the
// caller's splits nor than one step per warp (bf16: 8 ids, 64 per split), 1 where
// the caller allows one. On an H200-class device (100+ SMs) one decode row
// spreads over at least 16 splits per KV group, and 64 rows (128 row-group
// blocks, about one per SM) take one split.
TEST(GpuSparseAttentionSplits, TensorCoreSplitsFillTheDeviceOnce) {
  const gpu_test::AttnCase c = gpu_test::make_attn_case(long_rows(256, 12, PrecisionProfile::kEngine), 1);
  const AttentionParams& p = c.params;
  ASSERT_TRUE(gpu::tensor_core_attention_available(p));
  const int cols = gpu::sparse_attention_columns(p);
  for (int64_t rows : {1, 4, 64})
    for (int ids_per_split : {32, 64, 128, 256, 512, 1024, 2176}) {
      SCOPED_TRACE(testing::Message() << rows << " rows, ids_per_split " << ids_per_split);
      const int s = gpu::tensor_core_attention_splits(p, KvDtype::kBf16, rows, ids_per_split);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, gpu::sparse_attention_splits(p, ids_per_split));
      EXPECT_LE(s, (cols + 63) / 64);
    }
  EXPECT_EQ(gpu::tensor_core_attention_splits(p, KvDtype::kBf16, 4, 2176), 1);
  if (gpu::device_limits().multiprocessors < 100) GTEST_SKIP() << "the sizes below are for 100+ SMs";
  EXPECT_GE(gpu::tensor_core_attention_splits(p, KvDtype::kBf16, 1, 64), 16);
  EXPECT_GE(gpu::tensor_core_attention_splits(p, KvDtype::kFp8, 1, 64), 16);
  EXPECT_EQ(gpu::tensor_core_attention_splits(p, KvDtype::kBf16, 64, 64), 1);
}

// One decode row of 2051 counted ids, alone in its step: the tensor-core
// kernel spreads each KV group's row over many blocks (33 at 64 ids per
// split), one step of ids per warp, and the merge kernel combines them.
// Engine and exact profiles (the exact one takes the portable kernel), bf16
// and fp8 KV.
TEST(GpuSparseAttentionSplits, OneDecodeRowMatchesReference) {
  const uint64_t seed = gpu_test::case_seed("one-row");
  for (auto profile : {PrecisionProfile::kEngine, PrecisionProfile::kExact})
    for (KvDtype kv : {KvDtype::kBf16, KvDtype::kFp8}) {
      AttnSpec s = long_rows(256, 12, profile);
      s.one_row = true;
      s.kv = kv;
      const gpu_test::AttnCase c = gpu_test::make_attn_case(s, seed);
      ASSERT_EQ(c.layout.num_tokens, 1);
      for (int ids_per_split : {64, 128, 256}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(s)
                                        << ", ids_per_split " << ids_per_split << ", tensor-core splits "
                                        << gpu::tensor_core_attention_splits(c.params, kv, 1, ids_per_split));
        gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c, ids_per_split));
      }
    }
}

// The gate, A and gated output need no alignment beyond their element's:
// pointers one element off every vector boundary give the aligned run's
// bits. One split, so that the tensor-core kernel's own epilogue does the
// stores (not the merge kernel); bf16 and fp8. (Vector stores there, with
// an element-wise fallback, measured no faster: docs/performance.md, ninth
// pass. This keeps any such path honest.)
TEST(GpuSparseAttentionSplits, MisalignedOutputsGiveTheAlignedBits) {
  const uint64_t seed = gpu_test::case_seed("misaligned-io");
  for (KvDtype kv : {KvDtype::kBf16, KvDtype::kFp8}) {
    AttnSpec s = long_rows(256, 12, PrecisionProfile::kEngine);
    s.kv = kv;
    const gpu_test::AttnCase c = gpu_test::make_attn_case(s, seed);
    SCOPED_TRACE(testing::Message() << "seed " << seed << " (QSA_TEST_SEED), " << gpu_test::spec_name(s));
    ASSERT_EQ(gpu::tensor_core_attention_splits(c.params, kv, c.layout.num_tokens, 2176), 1);
    const gpu_test::GpuOutputs aligned = gpu_test::run_gpu_path(c, gpu::AttentionPath::kDecode, nullptr, 2176);
    const gpu_test::GpuOutputs shifted = gpu_test::run_gpu_path(c, gpu::AttentionPath::kDecode, nullptr, 2176, true);
    gpu_test::expect_matches_reference(c, aligned);
    ASSERT_NO_FATAL_FAILURE(gpu_test::expect_same_bits(aligned, shifted));
  }
}

}  // namespace
}  // namespace qsa
