// The indexer's side caches (spec section 4): the raw-key ring keeps each
// member's key and (t, h, w) position and refuses to hand out a member it no
// longer holds; the compressed cache tags each row with its block id.
#include "reference/side_caches.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference/core/errors.hpp"
#include "reference/core/rng.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x51decac4eULL;
constexpr int kDim = 8;
constexpr int kCapacity = 4;

std::vector<double> random_key(uint64_t seed, int64_t index) {
  const CounterRng rng(seed, "side_caches.key");
  std::vector<double> k(kDim);
  for (int d = 0; d < kDim; ++d) k[static_cast<size_t>(d)] = rng.normal(static_cast<uint64_t>(index * kDim + d));
  return k;
}

using test::input_error_message;

TEST(RawKeyRing, RejectsNonPositiveSizes) {
  EXPECT_THROW(RawKeyRing(0, kCapacity, kDim), ConfigError);
  EXPECT_THROW(RawKeyRing(2, 0, kDim), ConfigError);
  EXPECT_THROW(RawKeyRing(2, kCapacity, 0), ConfigError);
}

TEST(RawKeyRing, WriteThenReadReturnsKeyAndRopeTriple) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  RawKeyRing ring(3, kCapacity, kDim);
  EXPECT_EQ(ring.capacity(), kCapacity);
  EXPECT_EQ(ring.num_blocks(), 3);
  for (int64_t s = 0; s < 3 * kCapacity; ++s) EXPECT_EQ(ring.position_at(s), -1) << "slot " << s;

  // Positions 9..12 of the request on ring block 2, with an mRoPE triple
  // whose h and w rows differ from t.
  for (int64_t p = 9; p <= 12; ++p) {
    const int64_t slot = 2 * kCapacity + p % kCapacity;
    const int64_t rope3[3] = {p, 100 + p, 200 + 2 * p};
    const std::vector<double> key = random_key(kSeed, p);
    ring.write(slot, p, rope3, key.data());
    EXPECT_EQ(ring.position_at(slot), p);
  }
  for (int64_t p = 9; p <= 12; ++p) {
    SCOPED_TRACE(testing::Message() << "position " << p);
    int64_t rope3[3] = {-7, -7, -7};
    const double* got = ring.read(2, p, rope3);
    EXPECT_EQ(rope3[0], p);
    EXPECT_EQ(rope3[1], 100 + p);
    EXPECT_EQ(rope3[2], 200 + 2 * p);
    const std::vector<double> key = random_key(kSeed, p);
    for (int d = 0; d < kDim; ++d) EXPECT_EQ(got[d], key[static_cast<size_t>(d)]) << "dim " << d;
    EXPECT_EQ(got, ring.key_at(2 * kCapacity + p % kCapacity));
  }
  // The other blocks are untouched.
  for (int64_t s = 0; s < 2 * kCapacity; ++s) EXPECT_EQ(ring.position_at(s), -1) << "slot " << s;
}

TEST(RawKeyRing, ReadingAnOverwrittenMemberThrows) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  RawKeyRing ring(2, kCapacity, kDim);
  const int64_t rope3[3] = {1, 1, 1};
  const std::vector<double> key = random_key(kSeed, 0);
  ring.write(kCapacity + 1, 1, rope3, key.data());
  ring.write(kCapacity + 1, 1 + kCapacity, rope3, key.data());  // a later token reusing the slot
  int64_t out[3];
  const std::string msg = input_error_message([&] { ring.read(1, 1, out); });
  EXPECT_NE(msg.find("overwritten"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 1"), std::string::npos) << msg;
  EXPECT_NO_THROW(ring.read(1, 1 + kCapacity, out));
}

TEST(RawKeyRing, ReadingANeverWrittenMemberThrows) {
  RawKeyRing ring(2, kCapacity, kDim);
  int64_t out[3];
  const std::string msg = input_error_message([&] { ring.read(0, 2, out); });
  EXPECT_NE(msg.find("never written"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("overwritten"), std::string::npos) << msg;
}

TEST(RawKeyRing, WriteOutOfRangeThrows) {
  RawKeyRing ring(2, kCapacity, kDim);
  const int64_t rope3[3] = {0, 0, 0};
  const std::vector<double> key = random_key(kSeed, 0);
  EXPECT_THROW(ring.write(2 * kCapacity, 0, rope3, key.data()), InputError);
  EXPECT_THROW(ring.write(-1, 0, rope3, key.data()), InputError);
}

TEST(CompressedCache, RejectsNonPositiveSizes) {
  EXPECT_THROW(CompressedCache(0, 4, kDim), ConfigError);
  EXPECT_THROW(CompressedCache(2, 0, kDim), ConfigError);
  EXPECT_THROW(CompressedCache(2, 4, 0), ConfigError);
}

TEST(CompressedCache, RowsKeepTheirKeyAndBlockTag) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  CompressedCache cache(3, 4, kDim);
  EXPECT_EQ(cache.num_rows(), 12);
  EXPECT_EQ(cache.rows_per_page(), 4);
  EXPECT_EQ(cache.dim(), kDim);
  for (int64_t s = 0; s < cache.num_rows(); ++s) EXPECT_EQ(cache.block_at(s), -1) << "row " << s;
  const std::vector<double> a = random_key(kSeed, 1), b = random_key(kSeed, 2);
  cache.write(5, 9, a.data());
  EXPECT_EQ(cache.block_at(5), 9);
  for (int d = 0; d < kDim; ++d) EXPECT_EQ(cache.row(5)[d], a[static_cast<size_t>(d)]);
  cache.write(5, 13, b.data());  // the page was recycled for another block
  EXPECT_EQ(cache.block_at(5), 13);
  for (int d = 0; d < kDim; ++d) EXPECT_EQ(cache.row(5)[d], b[static_cast<size_t>(d)]);
  for (int64_t s = 0; s < cache.num_rows(); ++s) {
    if (s == 5) continue;
    EXPECT_EQ(cache.block_at(s), -1) << "row " << s;
  }
  EXPECT_THROW(cache.write(12, 0, a.data()), InputError);
  EXPECT_THROW(cache.write(-1, 0, a.data()), InputError);
}

}  // namespace
}  // namespace qsa
