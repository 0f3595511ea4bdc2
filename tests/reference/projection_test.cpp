#include "reference/projection.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string_view>

#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5eed0001;

ProjectionParams params(int64_t rows, int in_dim, int out_dim, bool round_output = false) {
  ProjectionParams p;
  p.rows = rows;
  p.in_dim = in_dim;
  p.out_dim = out_dim;
  p.round_output = round_output;
  return p;
}

// Row counts that leave a partial last tile, so tile edges are exercised.
constexpr int64_t kRows = 150;
constexpr int kIn = 96;
constexpr int kOut = 40;

TEST(ProjectionTest, MatchesNaiveTripleLoop) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kRows, kIn}, kSeed, "x");
  const TensorD w = test::random_normal({kOut, kIn}, kSeed, "w");
  TensorD y;
  project(params(kRows, kIn, kOut), x, w, y);
  ASSERT_EQ(y.shape, (Shape{kRows, kOut}));

  for (int64_t r = 0; r < kRows; ++r) {
    for (int o = 0; o < kOut; ++o) {
      double sum = 0.0, abs_sum = 0.0;
      for (int k = 0; k < kIn; ++k) {
        sum += x.at(r, k) * w.at(o, k);
        abs_sum += std::abs(x.at(r, k) * w.at(o, k));
      }
      ASSERT_NEAR(y.at(r, o), sum, tol::projection_dot_tol(kIn, abs_sum))
          << "[row=" << r << ", out=" << o << "]";
    }
  }
}

TEST(ProjectionTest, BitIdenticalForOneAndTwoThreads) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const int64_t rows = 200;  // four tiles, the last one partial
  const TensorD x = test::random_normal({rows, kIn}, kSeed, "x");
  const TensorD w = test::random_normal({kOut, kIn}, kSeed, "w");
  const int saved = omp_get_max_threads();
  TensorD y1, y2;
  omp_set_num_threads(1);
  project(params(rows, kIn, kOut), x, w, y1);
  omp_set_num_threads(2);
  project(params(rows, kIn, kOut), x, w, y2);
  omp_set_num_threads(saved);
  ASSERT_EQ(y1.shape, y2.shape);
  for (int64_t i = 0; i < y1.numel(); ++i) {
    ASSERT_EQ(y1.data[i], y2.data[i]) << "[row=" << i / kOut << ", out=" << i % kOut << "]";
  }
}

TEST(ProjectionTest, RoundOutputIsOneBf16RoundingOfTheExactProduct) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kRows, kIn}, kSeed, "x");
  const TensorD w = test::random_normal({kOut, kIn}, kSeed, "w");
  TensorD exact, rounded;
  project(params(kRows, kIn, kOut), x, w, exact);
  project(params(kRows, kIn, kOut, /*round_output=*/true), x, w, rounded);
  for (int64_t i = 0; i < exact.numel(); ++i) {
    ASSERT_EQ(rounded.data[i], round_bf16(exact.data[i]))
        << "[row=" << i / kOut << ", out=" << i % kOut << "]";
  }
}

TEST(ProjectionTest, ReusedOutputBufferIsResized) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({3, kIn}, kSeed, "x");
  const TensorD w = test::random_normal({kOut, kIn}, kSeed, "w");
  TensorD y = test::random_normal({7, 5}, kSeed, "stale");
  project(params(3, kIn, kOut), x, w, y);
  EXPECT_EQ(y.shape, (Shape{3, kOut}));
  TensorD empty_rows;
  project(params(0, kIn, kOut), TensorD({0, kIn}), w, empty_rows);
  EXPECT_EQ(empty_rows.shape, (Shape{0, kOut}));
}

TEST(ProjectionTest, ShapeErrorsThrowInputError) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({4, kIn}, kSeed, "x");
  const TensorD w = test::random_normal({kOut, kIn}, kSeed, "w");
  TensorD y;
  EXPECT_THROW(project(params(5, kIn, kOut), x, w, y), InputError);
  EXPECT_THROW(project(params(4, kIn, kOut), test::random_normal({4, kIn + 1}, kSeed, "x"), w, y),
               InputError);
  EXPECT_THROW(project(params(4, kIn, kOut + 1), x, w, y), InputError);
  EXPECT_THROW(project(params(4, kIn, kOut), x, test::random_normal({kIn, kOut}, kSeed, "w"), y),
               InputError);
  EXPECT_THROW(project(params(4, kIn, kOut), TensorD({4 * kIn}), w, y), InputError);
  EXPECT_THROW(project(params(4, 0, kOut), x, w, y), ConfigError);
}

}  // namespace
}  // namespace qsa
