// bf16 / fp16 rounding from fp64: exact bit patterns at the interesting
// points (ties, subnormals, overflow, NaN) plus a nearest-value property check
// over random doubles (no oracle needed) and, where the compiler has
// _Float16, an exhaustive comparison with its conversion.
#include "reference/core/float_formats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "reference/core/rng.hpp"

namespace qsa {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(Bf16, KnownValues) {
  EXPECT_EQ(bf16_bits(1.0), 0x3F80);
  EXPECT_EQ(bf16_bits(-2.5), 0xC020);
  EXPECT_EQ(bf16_bits(0.0), 0x0000);
  EXPECT_EQ(bf16_bits(-0.0), 0x8000);
  EXPECT_EQ(bf16_bits(0x1.FEp127), 0x7F7F);  // largest finite
  EXPECT_EQ(bf16_bits(0x1p-126), 0x0080);    // smallest normal
  EXPECT_EQ(bf16_bits(0x1p-133), 0x0001);    // smallest subnormal
  EXPECT_EQ(bf16_bits(-0x1p-133), 0x8001);
  EXPECT_EQ(bf16_value(0x3F80), 1.0);
  EXPECT_EQ(bf16_value(0xC020), -2.5);
  EXPECT_EQ(bf16_value(0x7F7F), 0x1.FEp127);
  EXPECT_EQ(bf16_value(0x0001), 0x1p-133);
  EXPECT_EQ(bf16_value(0x7F80), kInf);
  EXPECT_EQ(bf16_value(0xFF80), -kInf);
}

TEST(Bf16, TiesRoundToEven) {
  // 1 + 2^-8 is halfway between 1.0 (0x3F80, even) and 1 + 2^-7 (0x3F81).
  EXPECT_EQ(bf16_bits(1.0 + 0x1p-8), 0x3F80);
  // 1 + 3*2^-8 is halfway between 0x3F81 and 0x3F82 (even): rounds up.
  EXPECT_EQ(bf16_bits(1.0 + 3 * 0x1p-8), 0x3F82);
  EXPECT_EQ(bf16_bits(-(1.0 + 3 * 0x1p-8)), 0xBF82);
  // Just above a tie must round up. Going through fp32 first would drop the
  // 2^-40 and then tie to even (0x3F80): this catches double rounding.
  EXPECT_EQ(bf16_bits(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);
  EXPECT_EQ(bf16_bits(1.0 + 0x1p-8 - 0x1p-40), 0x3F80);
}

TEST(Bf16, SubnormalTies) {
  EXPECT_EQ(bf16_bits(0.5 * 0x1p-133), 0x0000);  // tie with 0: to even (zero)
  EXPECT_EQ(bf16_bits(0.6 * 0x1p-133), 0x0001);
  EXPECT_EQ(bf16_bits(1.5 * 0x1p-133), 0x0002);
  EXPECT_EQ(bf16_bits(2.5 * 0x1p-133), 0x0002);
  // Largest subnormal rounding up into the smallest normal.
  EXPECT_EQ(bf16_bits(0x1p-126 - 0.5 * 0x1p-133), 0x0080);
  EXPECT_EQ(bf16_bits(1e-300), 0x0000);
}

TEST(Bf16, OverflowGoesToInf) {
  // Halfway between the largest finite (odd significand) and 2^128 ties to
  // the even neighbour, which is inf.
  EXPECT_EQ(bf16_bits(0x1.FFp127), 0x7F80);
  EXPECT_EQ(bf16_bits(0x1.FFp127 - 0x1p100), 0x7F7F);
  EXPECT_EQ(bf16_bits(1e39), 0x7F80);
  EXPECT_EQ(bf16_bits(-1e300), 0xFF80);
  EXPECT_EQ(bf16_bits(kInf), 0x7F80);
  EXPECT_EQ(bf16_bits(-kInf), 0xFF80);
}

TEST(Bf16, NanIsQuietAndKeepsSign) {
  EXPECT_EQ(bf16_bits(kNan), 0x7FC0);
  EXPECT_EQ(bf16_bits(-kNan), 0xFFC0);
  EXPECT_TRUE(std::isnan(bf16_value(0x7FC0)));
  EXPECT_TRUE(std::isnan(bf16_value(0x7F81)));  // signalling payload still NaN
  EXPECT_TRUE(std::signbit(bf16_value(0xFFC0)));
  EXPECT_TRUE(std::isnan(round_bf16(kNan)));
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_bits(1.0), 0x3C00);
  EXPECT_EQ(fp16_bits(-2.5), 0xC100);
  EXPECT_EQ(fp16_bits(-0.0), 0x8000);
  EXPECT_EQ(fp16_bits(65504.0), 0x7BFF);  // largest finite
  EXPECT_EQ(fp16_bits(0x1p-14), 0x0400);  // smallest normal
  EXPECT_EQ(fp16_bits(0x1p-24), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp16_value(0x3C00), 1.0);
  EXPECT_EQ(fp16_value(0xC100), -2.5);
  EXPECT_EQ(fp16_value(0x7BFF), 65504.0);
  EXPECT_EQ(fp16_value(0x0001), 0x1p-24);
  EXPECT_EQ(fp16_value(0x03FF), 1023 * 0x1p-24);  // largest subnormal
  EXPECT_EQ(fp16_value(0x7C00), kInf);
  EXPECT_EQ(fp16_value(0xFC00), -kInf);
}

TEST(Fp16, TiesRoundToEven) {
  EXPECT_EQ(fp16_bits(1.0 + 0x1p-11), 0x3C00);
  EXPECT_EQ(fp16_bits(1.0 + 3 * 0x1p-11), 0x3C02);
  EXPECT_EQ(fp16_bits(1.0 + 0x1p-11 + 0x1p-40), 0x3C01);
  EXPECT_EQ(fp16_bits(0.5 * 0x1p-24), 0x0000);
  EXPECT_EQ(fp16_bits(1.5 * 0x1p-24), 0x0002);
  EXPECT_EQ(fp16_bits(2.5 * 0x1p-24), 0x0002);
  EXPECT_EQ(fp16_bits(-2.5 * 0x1p-24), 0x8002);
}

TEST(Fp16, OverflowAndNan) {
  EXPECT_EQ(fp16_bits(65520.0), 0x7C00);  // tie between 65504 (odd) and 2^16
  EXPECT_EQ(fp16_bits(65519.99), 0x7BFF);
  EXPECT_EQ(fp16_bits(-1e6), 0xFC00);
  EXPECT_EQ(fp16_bits(kInf), 0x7C00);
  EXPECT_EQ(fp16_bits(kNan), 0x7E00);
  EXPECT_EQ(fp16_bits(-kNan), 0xFE00);
  EXPECT_TRUE(std::isnan(fp16_value(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_value(0x7C01)));
  EXPECT_TRUE(std::signbit(fp16_value(0xFE00)));
}

// x must be no farther from the chosen code's value than from either
// neighbour's, and an exact tie must pick the even code. Differences of
// nearby doubles are exact (Sterbenz), so the comparisons are exact.
template <class Bits, class Value>
void expect_nearest(double x, uint16_t max_finite, Bits bits_of, Value value_of) {
  uint16_t b = bits_of(x);
  uint16_t mag = b & 0x7FFF;
  ASSERT_LE(mag, max_finite) << "x = " << x;
  double v = std::fabs(value_of(b));
  double ax = std::fabs(x);
  double d = std::fabs(ax - v);
  if (mag > 0) {
    double below = std::fabs(value_of(static_cast<uint16_t>(mag - 1)));
    double db = ax - below;
    EXPECT_TRUE(d < db || (d == db && (mag & 1) == 0)) << "x = " << x << " bits " << b;
  }
  if (mag < max_finite) {
    double above = value_of(static_cast<uint16_t>(mag + 1));
    double da = above - ax;
    EXPECT_TRUE(d < da || (d == da && (mag & 1) == 0)) << "x = " << x << " bits " << b;
  }
}

TEST(FloatFormats, RandomValuesRoundToNearest) {
  const uint64_t seed = 20240611;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  CounterRng rng(seed, "float-formats-nearest");
  for (uint64_t i = 0; i < 20000; ++i) {
    // Random significand, exponent spread over both formats' whole range
    // including subnormals; half the draws are snapped to a normal-range tie
    // of bf16 (8 significant bits) or fp16 (11).
    double mant = 1.0 + rng.uniform(3 * i);
    int tie_bits = (i / 2) % 2 ? 7 : 10;
    if (rng.uniform(3 * i + 1) < 0.5)
      mant = std::ldexp(std::floor(std::ldexp(mant, tie_bits)) + 0.5, -tie_bits);
    int exp = static_cast<int>(rng.uniform(3 * i + 2) * 300.0) - 150;
    double x = (i % 2 ? -1.0 : 1.0) * std::ldexp(mant, exp);
    if (std::fabs(x) < 0x1.FEp127) expect_nearest(x, 0x7F7F, bf16_bits, bf16_value);
    if (std::fabs(x) < 65504.0) expect_nearest(x, 0x7BFF, fp16_bits, fp16_value);
  }
}

#ifdef __FLT16_MANT_DIG__
// Where the compiler has _Float16, its (correctly rounded) conversion from
// double is an independent oracle: check every code's value, every midpoint
// between neighbours (the ties) and the doubles either side of it.
uint16_t oracle_fp16_bits(double x) {
  _Float16 h = static_cast<_Float16>(x);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

TEST(Fp16, MatchesCompilerFloat16) {
  for (uint32_t b = 0; b < 0x7C00; ++b) {
    double v = fp16_value(static_cast<uint16_t>(b));
    double next = b + 1 < 0x7C00 ? fp16_value(static_cast<uint16_t>(b + 1)) : 65536.0;
    double mid = 0.5 * (v + next);
    for (double x : {v, mid, std::nextafter(mid, 0.0), std::nextafter(mid, kInf)}) {
      EXPECT_EQ(fp16_bits(x), oracle_fp16_bits(x)) << "x = " << x;
      EXPECT_EQ(fp16_bits(-x), oracle_fp16_bits(-x)) << "x = " << -x;
    }
  }
}
#endif

}  // namespace
}  // namespace qsa
