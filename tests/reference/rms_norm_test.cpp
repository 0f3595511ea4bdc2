#include "reference/rms_norm.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string_view>

#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5eed0002;

RmsNormParams params(int64_t rows, int dim, double eps, bool round_output = false) {
  RmsNormParams p;
  p.rows = rows;
  p.dim = dim;
  p.eps = eps;
  p.round_output = round_output;
  return p;
}

constexpr int64_t kTokens = 5;
constexpr int64_t kHeads = 3;
constexpr int kDim = 64;
constexpr double kEps = 1e-6;

TEST(RmsNormTest, HandExample) {
  // x = [3, 4]: mean(x^2) = 12.5; w = [0, 1] gains 1 and 2.
  TensorD x({2});
  x.data = {3.0, 4.0};
  TensorD w({2});
  w.data = {0.0, 1.0};
  TensorD y;
  gemma_rms_norm(params(1, 2, 0.0), x, w, y);
  const double rms = std::sqrt(12.5);
  ASSERT_EQ(y.shape, (Shape{2}));
  EXPECT_NEAR(y.data[0], 3.0 / rms, tol::rms_norm_rel_tol(2) * (3.0 / rms));
  EXPECT_NEAR(y.data[1], 8.0 / rms, tol::rms_norm_rel_tol(2) * (8.0 / rms));
}

TEST(RmsNormTest, MatchesFormulaPerHead) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kTokens, kHeads, kDim}, kSeed, "x");
  const TensorD w = test::random_normal({kDim}, kSeed, "w");
  TensorD y;
  gemma_rms_norm(params(kTokens * kHeads, kDim, kEps), x, w, y);
  ASSERT_EQ(y.shape, x.shape);
  for (int64_t r = 0; r < kTokens * kHeads; ++r) {
    const double* xr = x.ptr() + r * kDim;
    double mean_sq = 0.0;
    for (int i = kDim - 1; i >= 0; --i) mean_sq += xr[i] * xr[i] / kDim;
    const double inv_rms = 1.0 / std::sqrt(mean_sq + kEps);
    for (int i = 0; i < kDim; ++i) {
      const double expected = (1.0 + w.data[i]) * (xr[i] * inv_rms);
      ASSERT_NEAR(y.data[r * kDim + i], expected, tol::rms_norm_rel_tol(kDim) * std::abs(expected))
          << "[token=" << r / kHeads << ", head=" << r % kHeads << ", dim=" << i << "]";
    }
  }
}

TEST(RmsNormTest, ZeroWeightIsUnitGain) {
  // Gemma stores the gain as w with an implicit +1: w = 0 leaves unit RMS,
  // and w = c scales that output by exactly (1 + c).
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kHeads, kDim}, kSeed, "x");
  const TensorD zero_w({kDim}, 0.0);
  TensorD y;
  gemma_rms_norm(params(kHeads, kDim, 0.0), x, zero_w, y);
  for (int64_t r = 0; r < kHeads; ++r) {
    double mean_sq = 0.0;
    for (int i = 0; i < kDim; ++i) mean_sq += y.at(r, i) * y.at(r, i);
    EXPECT_NEAR(mean_sq / kDim, 1.0, tol::rms_norm_unit_mean_sq_tol(kDim)) << "[head=" << r << "]";
  }
  const double gain = CounterRng(kSeed, "gain").uniform(0);
  const TensorD const_w({kDim}, gain);
  TensorD scaled;
  gemma_rms_norm(params(kHeads, kDim, 0.0), x, const_w, scaled);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double expected = (1.0 + gain) * y.data[i];
    ASSERT_NEAR(scaled.data[i], expected, tol::rms_norm_rel_tol(kDim) * std::abs(expected))
        << "[head=" << i / kDim << ", dim=" << i % kDim << "]";
  }
}

TEST(RmsNormTest, RoundsOnceAfterTheGain) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kTokens, kHeads, kDim}, kSeed, "x");
  const TensorD w = test::random_normal({kDim}, kSeed, "w");
  TensorD exact, rounded;
  gemma_rms_norm(params(kTokens * kHeads, kDim, kEps), x, w, exact);
  gemma_rms_norm(params(kTokens * kHeads, kDim, kEps, /*round_output=*/true), x, w, rounded);
  for (int64_t i = 0; i < exact.numel(); ++i) {
    // Bit-equal to one rounding of the exact value: a rounding before the
    // gain would leave values that are bf16 but not this one.
    ASSERT_EQ(rounded.data[i], round_bf16(exact.data[i])) << "[element=" << i << "]";
  }
}

TEST(RmsNormTest, InPlaceMatchesOutOfPlace) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kTokens, kHeads, kDim}, kSeed, "x");
  const TensorD w = test::random_normal({kDim}, kSeed, "w");
  TensorD y;
  gemma_rms_norm(params(kTokens * kHeads, kDim, kEps), x, w, y);
  TensorD inplace = x;
  gemma_rms_norm(params(kTokens * kHeads, kDim, kEps), inplace, w, inplace);
  ASSERT_EQ(inplace.shape, x.shape);
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_EQ(inplace.data[i], y.data[i]) << "[element=" << i << "]";
}

TEST(RmsNormTest, ShapeErrorsThrow) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const TensorD x = test::random_normal({kHeads, kDim}, kSeed, "x");
  const TensorD w = test::random_normal({kDim}, kSeed, "w");
  TensorD y;
  EXPECT_THROW(gemma_rms_norm(params(kHeads + 1, kDim, kEps), x, w, y), InputError);
  EXPECT_THROW(
      gemma_rms_norm(params(kHeads, kDim, kEps), x, test::random_normal({kDim + 1}, kSeed, "w"), y),
      InputError);
  EXPECT_THROW(
      gemma_rms_norm(params(kHeads, kDim, kEps), x, test::random_normal({1, kDim}, kSeed, "w"), y),
      InputError);
  EXPECT_THROW(gemma_rms_norm(params(kHeads, 0, kEps), x, w, y), ConfigError);
}

}  // namespace
}  // namespace qsa
