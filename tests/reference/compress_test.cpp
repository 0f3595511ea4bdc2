// Pooling of completed groups (spec section 4): a hand-checkable compressed
// key, the fp8 indexer store, gathering a request's compressed keys, and the
// ring update. Groups straddling chunk boundaries: compress_straddle_test.cpp.
#include "reference/compress.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rope.hpp"
#include "tests/reference/pooling_test_support.hpp"

namespace qsa {
namespace {

using namespace test;  // the pooling helpers
constexpr uint64_t kSeed = kPoolingSeed;

TEST(Compress, QuantizeIndexerFollowsDtypeAndStorageKnob) {
  Pooling s = pooling(PrecisionProfile::kExact, true, kSeed);
  const double x = 1.0 + 0x1p-20;  // not bf16- or fp8-representable
  EXPECT_EQ(quantize_indexer(s.cp, x), x);
  s.cp.round_storage = true;
  EXPECT_EQ(quantize_indexer(s.cp, x), round_bf16(x));
  s.cp.dtype = IndexerDtype::kFp8;
  EXPECT_EQ(quantize_indexer(s.cp, 300.3), round_fp8(300.3, Fp8Flavor::kE4m3fn));
  s.cp.fp8_flavor = Fp8Flavor::kE4m3fnuz;
  EXPECT_EQ(quantize_indexer(s.cp, 300.3), fp8_max(Fp8Flavor::kE4m3fnuz));  // saturates at 240
}

// Exact profile: k_c[b] = RoPE(norm(mean of the r raw keys)) at the (t, h, w)
// position of token b·r. The engine profile adds the storage points: the
// pooled mean, the norm and RoPE outputs in bf16. The test evaluates the same
// operations in the same order, so the rows agree bit for bit.
TEST(Compress, PooledKeyIsRopeOfNormOfMeanAtFirstTokenPosition) {
  for (const auto& [profile, zero_norm] : std::vector<std::pair<PrecisionProfile, bool>>{
           {PrecisionProfile::kExact, true}, {PrecisionProfile::kExact, false}, {PrecisionProfile::kEngine, false}}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile) << " zero k_norm "
                                    << zero_norm);
    const Pooling s = pooling(profile, zero_norm, kSeed);
    ASSERT_EQ(s.norm.round_output, s.cp.round_storage);
    ASSERT_EQ(s.rope.round_output, s.cp.round_storage);
    const int r = s.c.compress_ratio, dI = s.c.indexer_head_dim;
    const int32_t n = 3 * r + 1;  // three complete groups and one open token
    const TensorD all = request_raw_keys(s.c, n, kSeed);
    const PoolRun run = pool_in_chunks(s, all, {n});
    const CompressedRows& out = run.per_chunk.at(0);
    ASSERT_EQ(out.block, (std::vector<int64_t>{0, 1, 2}));
    ASSERT_EQ(out.token, (std::vector<int32_t>{r - 1, 2 * r - 1, 3 * r - 1}));
    const StepLayout l = chunk_layout(s.c, 0, n);
    for (int64_t b = 0; b < 3; ++b) {
      SCOPED_TRACE(testing::Message() << "block " << b);
      std::vector<double> mean(static_cast<size_t>(dI), 0.0), want(static_cast<size_t>(dI));
      for (int m = 0; m < r; ++m)
        for (int d = 0; d < dI; ++d) mean[static_cast<size_t>(d)] += all.at(b * r + m, d);
      for (double& x : mean) x = s.cp.round_storage ? round_bf16(x / r) : x / r;
      gemma_rms_norm_row(s.norm, mean.data(), s.k_norm.ptr(), want.data());
      const int64_t first = b * r;
      const int64_t pos3[3] = {test::LocalSteps::rope_axis(0, 0, first), test::LocalSteps::rope_axis(1, 0, first),
                               test::LocalSteps::rope_axis(2, 0, first)};
      rope_row(s.rope, pos3, want.data());
      for (double& x : want) x = s.cp.round_storage ? round_bf16(x) : x;  // the bf16 indexer store
      const int64_t slot = paged_slot(l.block_table_c, 0, b, s.c.compressed_rows_per_page());
      EXPECT_EQ(out.slot[static_cast<size_t>(b)], slot);
      EXPECT_EQ(run.cache.block_at(slot), b);
      for (int d = 0; d < dI; ++d) {
        EXPECT_EQ(out.keys.at(b, d), want[static_cast<size_t>(d)]) << "dim " << d;
        EXPECT_EQ(run.cache.row(slot)[d], want[static_cast<size_t>(d)]) << "dim " << d;
      }
    }
  }
}

// fp8 indexer dtype: every stored value is fp8-representable, and (since
// RoPE already stored bf16 under the engine profile) equals fp8 of the bf16
// row.
TEST(Compress, Fp8IndexerStoresFp8Values) {
  for (Fp8Flavor flavor : {Fp8Flavor::kE4m3fn, Fp8Flavor::kE4m3fnuz}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " flavour " << to_string(flavor));
    const Pooling s8 = pooling(PrecisionProfile::kEngine, false, kSeed, IndexerDtype::kFp8, flavor);
    const Pooling s16 = pooling(PrecisionProfile::kEngine, false, kSeed);
    const int32_t n = 5 * s8.c.compress_ratio;
    const TensorD all = request_raw_keys(s8.c, n, kSeed);
    const PoolRun r8 = pool_in_chunks(s8, all, {7, n - 7});
    const PoolRun r16 = pool_in_chunks(s16, all, {7, n - 7});
    ASSERT_EQ(r8.rows.size(), 5u);
    bool any_differs = false;
    for (const auto& [block, key] : r8.rows) {
      const std::vector<double>& k16 = r16.rows.at(block);
      for (size_t d = 0; d < key.size(); ++d) {
        EXPECT_EQ(round_fp8(key[d], flavor), key[d]) << "block " << block << " dim " << d;
        EXPECT_EQ(key[d], round_fp8(k16[d], flavor)) << "block " << block << " dim " << d;
        any_differs |= key[d] != k16[d];
      }
    }
    EXPECT_TRUE(any_differs) << "fp8 store left every bf16 value unchanged";
  }
}

TEST(Compress, WriteRingKeepsTheLastCTokensOfEachRequest) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Pooling s = pooling(PrecisionProfile::kExact, false, kSeed);
  const int C = s.c.ring_capacity();
  const int32_t n0 = C + 2, n1 = C - 1;
  StepMetadata m = simple_step({0, 0}, {n0, n1}, kPages);
  const StepLayout l = derive_step_layout(s.c, {2 * kPages, 2 * kPages}, m);
  const TensorD raw = request_raw_keys(s.c, n0 + n1, kSeed);
  RawKeyRing ring(2 * kPages, C, s.c.indexer_head_dim);
  write_ring(l, raw, ring);
  // Request 0 (ring block 0) keeps positions 2 .. C+1; request 1 (ring block
  // kPages) keeps all of its C-1 tokens; one slot stays empty.
  for (int64_t p = 0; p < n0; ++p) {
    const int64_t slot = p % C;
    if (p < n0 - C) {
      EXPECT_EQ(l.ring_slot[static_cast<size_t>(p)], -1) << "only the last C tokens go to the ring";
      continue;
    }
    EXPECT_EQ(ring.position_at(slot), p) << "request 0 position " << p;
    int64_t rope3[3];
    const double* k = ring.read(0, p, rope3);
    EXPECT_EQ(rope3[0], p);
    EXPECT_EQ(k[0], raw.at(p, 0));
  }
  for (int64_t p = 0; p < n1; ++p) EXPECT_EQ(ring.position_at(kPages * C + p), p) << "request 1 position " << p;
  EXPECT_EQ(ring.position_at(kPages * C + C - 1), -1);
}

TEST(Compress, GatherThrowsForUnwrittenStaleOrUnmappedBlocks) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Pooling s = pooling(PrecisionProfile::kExact, false, kSeed);
  const int r = s.c.compress_ratio, rows_per_page = s.c.compressed_rows_per_page();
  const int32_t n = rows_per_page * r;  // fills the first compressed page
  const TensorD all = request_raw_keys(s.c, n, kSeed);
  PoolRun run = pool_in_chunks(s, all, {n});
  const StepLayout l = chunk_layout(s.c, 0, n);

  const TensorD kc = gather_compressed_keys(l, 0, rows_per_page, run.cache);
  ASSERT_EQ(kc.shape, (Shape{rows_per_page, s.c.indexer_head_dim}));
  for (int64_t b = 0; b < rows_per_page; ++b)
    for (int d = 0; d < s.c.indexer_head_dim; ++d) EXPECT_EQ(kc.at(b, d), run.rows.at(b)[static_cast<size_t>(d)]);

  // Block rows_per_page sits on the second page, mapped but never written.
  std::string msg = input_error_message([&] { gather_compressed_keys(l, 0, rows_per_page + 1, run.cache); });
  EXPECT_NE(msg.find("block " + std::to_string(rows_per_page)), std::string::npos) << msg;
  EXPECT_NE(msg.find("never written"), std::string::npos) << msg;

  StepLayout unmapped = l;
  unmapped.block_table_c.at(0, 1) = -1;
  msg = input_error_message([&] { gather_compressed_keys(unmapped, 0, rows_per_page + 1, run.cache); });
  EXPECT_NE(msg.find("unmapped"), std::string::npos) << msg;

  const int64_t slot1 = paged_slot(l.block_table_c, 0, 1, rows_per_page);
  run.cache.write(slot1, 1 + rows_per_page, all.row(0));  // the row now holds another block
  msg = input_error_message([&] { gather_compressed_keys(l, 0, 2, run.cache); });
  EXPECT_NE(msg.find("block 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("holds " + std::to_string(1 + rows_per_page)), std::string::npos) << msg;
}

TEST(Compress, RejectsRawKeysOfTheWrongShape) {
  const Pooling s = pooling(PrecisionProfile::kExact, false, kSeed);
  PoolRun run = make_run(s);
  const StepLayout l = chunk_layout(s.c, 0, 4);
  const TensorD raw({3, s.c.indexer_head_dim}, 1.0);
  EXPECT_THROW(compress_completed_groups(s.cp, s.norm, s.rope, s.k_norm, l, raw, run.ring, run.cache), InputError);
}

}  // namespace
}  // namespace qsa
