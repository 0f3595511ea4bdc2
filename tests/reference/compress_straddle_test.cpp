// Groups straddling chunk boundaries (spec section 4): older members come
// from the ring as it stood before the step, so any chunking pools the same
// rows; incomplete groups have none; a missing ring member is an InputError.
#include "reference/compress.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "tests/reference/pooling_test_support.hpp"

namespace qsa {
namespace {

using namespace test;  // the pooling helpers
constexpr uint64_t kSeed = kPoolingSeed;

// A group whose first members arrived in an earlier chunk is pooled from the
// ring and must equal the single-chunk result exactly, in every profile.
TEST(Compress, StraddlingGroupMatchesSingleChunk) {
  for (PrecisionProfile profile : {PrecisionProfile::kExact, PrecisionProfile::kEngine}) {
    const Pooling s = pooling(profile, false, kSeed);
    const int r = s.c.compress_ratio;
    const int32_t n = 4 * r + 1;
    const TensorD all = request_raw_keys(s.c, n, kSeed);
    const PoolRun whole = pool_in_chunks(s, all, {n});
    ASSERT_EQ(whole.rows.size(), 4u);
    // The first chunk ends 1 or 2 tokens into group 1; r - 1 single tokens
    // make every group straddle.
    for (const std::vector<int32_t>& sizes : std::vector<std::vector<int32_t>>{
             {r + 1, n - r - 1}, {r + 2, n - r - 2}, {r + 1, 1, 1, n - r - 3}, std::vector<int32_t>(n, 1)}) {
      SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile) << " first chunk "
                                      << sizes[0] << " of " << sizes.size());
      expect_same_rows(pool_in_chunks(s, all, sizes), whole);
    }
  }
}

TEST(Compress, IncompleteGroupHasNoRowAndItsLastTokenCompletesIt) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Pooling s = pooling(PrecisionProfile::kEngine, false, kSeed);
  const int r = s.c.compress_ratio;
  const TensorD all = request_raw_keys(s.c, r, kSeed);
  PoolRun run = make_run(s);
  pool_chunk(s, all, 0, r - 1, run);  // p = 0 .. r-2
  EXPECT_TRUE(run.per_chunk.back().block.empty());
  EXPECT_EQ(run.per_chunk.back().keys.dim(0), 0);
  for (int64_t row = 0; row < run.cache.num_rows(); ++row) EXPECT_EQ(run.cache.block_at(row), -1);
  pool_chunk(s, all, r - 1, 1, run);  // p = r-1 completes block 0 from r-1 ring members
  ASSERT_EQ(run.per_chunk.back().block, std::vector<int64_t>{0});
  EXPECT_EQ(run.per_chunk.back().token, std::vector<int32_t>{0});
  expect_same_rows(run, pool_in_chunks(s, all, {r}));
}

// A chunk longer than C overwrites the ring slots of the straddling group's
// older members; pooling reads the ring before this step's writes.
TEST(Compress, LongChunkPoolsFromTheRingBeforeItsOwnWrites) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Pooling s = pooling(PrecisionProfile::kEngine, false, kSeed);
  const int r = s.c.compress_ratio, C = s.c.ring_capacity();
  const int32_t first = r + 2, second = C + 2 * r;
  ASSERT_GT(second, C);
  const TensorD all = request_raw_keys(s.c, first + second, kSeed);
  expect_same_rows(pool_in_chunks(s, all, {first, second}), pool_in_chunks(s, all, {first + second}));

  // The order matters: the second chunk's ring writes destroy position r.
  PoolRun run = make_run(s);
  pool_chunk(s, all, 0, first, run);
  const StepLayout l = chunk_layout(s.c, first, second);
  const TensorD raw = chunk_rows(all, first, second);
  write_ring(l, raw, run.ring);
  const std::string msg = input_error_message(
      [&] { compress_completed_groups(s.cp, s.norm, s.rope, s.k_norm, l, raw, run.ring, run.cache); });
  EXPECT_NE(msg.find("overwritten"), std::string::npos) << msg;
}

TEST(Compress, StraddlingGroupWithMissingRingMemberThrows) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Pooling s = pooling(PrecisionProfile::kExact, false, kSeed);
  const int r = s.c.compress_ratio, C = s.c.ring_capacity();
  const int32_t first = r + 2, second = r;
  const TensorD all = request_raw_keys(s.c, first + second, kSeed);
  const StepLayout l2 = chunk_layout(s.c, first, second);
  const TensorD raw2 = chunk_rows(all, first, second);

  // The first step was skipped: the ring never got positions r and r + 1.
  PoolRun skipped = make_run(s);
  std::string msg = input_error_message([&] {
    compress_completed_groups(s.cp, s.norm, s.rope, s.k_norm, l2, raw2, skipped.ring, skipped.cache);
  });
  EXPECT_NE(msg.find("never written"), std::string::npos) << msg;

  // The ring slot of position r holds a later token (a trace that replays
  // steps out of order).
  PoolRun stale = make_run(s);
  pool_chunk(s, all, 0, first, stale);
  const int64_t rope3[3] = {r + C, r + C, r + C};
  stale.ring.write(l2.ring_blocks[0] * int64_t{C} + r % C, r + C, rope3, all.row(0));
  msg = input_error_message([&] {
    compress_completed_groups(s.cp, s.norm, s.rope, s.k_norm, l2, raw2, stale.ring, stale.cache);
  });
  EXPECT_NE(msg.find("overwritten"), std::string::npos) << msg;
}

}  // namespace
}  // namespace qsa
