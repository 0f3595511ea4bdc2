// fp8 e4m3 flavours: every code round-trips, ties go to even (normal and
// subnormal), overflow saturates or becomes NaN as each flavour says, and the
// fnuz zero/NaN quirks hold.
#include "reference/core/fp8.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace qsa {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

std::string flavor_name(Fp8Flavor f) {
  switch (f) {
    case Fp8Flavor::kE4m3fn:
      return "e4m3fn";
    case Fp8Flavor::kE4m3fnuz:
      return "e4m3fnuz";
    case Fp8Flavor::kE4m3fnEagerNan:
      return "e4m3fn_eager_nan";
  }
  return "?";
}

bool is_nan_code(uint8_t c, Fp8Flavor f) {
  return f == Fp8Flavor::kE4m3fnuz ? c == 0x80 : (c & 0x7F) == 0x7F;
}

class Fp8AllFlavors : public testing::TestWithParam<Fp8Flavor> {};

TEST_P(Fp8AllFlavors, EveryCodeRoundTrips) {
  const Fp8Flavor f = GetParam();
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    double v = fp8_decode(code, f);
    if (is_nan_code(code, f)) {
      ++nan_codes;
      EXPECT_TRUE(std::isnan(v)) << "code " << c;
      EXPECT_TRUE(is_nan_code(fp8_encode(v, f), f)) << "code " << c;
      continue;
    }
    EXPECT_FALSE(std::isnan(v) || std::isinf(v)) << "code " << c;
    EXPECT_EQ(fp8_encode(v, f), code) << "code " << c << " value " << v;
    EXPECT_EQ(round_fp8(v, f), v) << "code " << c;
  }
  EXPECT_EQ(nan_codes, f == Fp8Flavor::kE4m3fnuz ? 1 : 2);
}

// Halfway between two adjacent codes must pick the even one; a hair either
// side must pick the nearer one. Covers subnormals, the subnormal/normal seam
// and every binade; for the fn flavours the top code is the one below NaN.
TEST_P(Fp8AllFlavors, TiesRoundToEven) {
  const Fp8Flavor f = GetParam();
  const uint8_t top = f == Fp8Flavor::kE4m3fnuz ? 0x7F : 0x7E;
  for (uint8_t c = 0; c < top; ++c) {
    const uint8_t next = static_cast<uint8_t>(c + 1);
    double lo = fp8_decode(c, f);
    double hi = fp8_decode(next, f);
    double mid = 0.5 * (lo + hi);
    const uint8_t even = (c % 2 == 0) ? c : next;
    SCOPED_TRACE(testing::Message() << "between codes " << int(c) << " and " << int(next));
    EXPECT_EQ(fp8_encode(mid, f), even);
    EXPECT_EQ(fp8_encode(std::nextafter(mid, 0.0), f), c);
    EXPECT_EQ(fp8_encode(std::nextafter(mid, kInf), f), next);
    // fnuz has no -0: a negative value that rounds to zero is plain 0x00.
    const uint8_t neg_even = (even == 0 && f == Fp8Flavor::kE4m3fnuz) ? 0 : (even | 0x80);
    EXPECT_EQ(fp8_encode(-mid, f), neg_even);
  }
}

TEST_P(Fp8AllFlavors, NanEncodesToNan) {
  const Fp8Flavor f = GetParam();
  EXPECT_TRUE(is_nan_code(fp8_encode(kNan, f), f));
  EXPECT_TRUE(is_nan_code(fp8_encode(-kNan, f), f));
  EXPECT_TRUE(std::isnan(round_fp8(kNan, f)));
}

INSTANTIATE_TEST_SUITE_P(Flavors, Fp8AllFlavors,
                         testing::Values(Fp8Flavor::kE4m3fn, Fp8Flavor::kE4m3fnuz,
                                         Fp8Flavor::kE4m3fnEagerNan),
                         [](const testing::TestParamInfo<Fp8Flavor>& p) {
                           return flavor_name(p.param);
                         });

TEST(Fp8E4m3fn, KnownCodes) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fn;
  EXPECT_EQ(fp8_encode(1.0, f), 0x38);
  EXPECT_EQ(fp8_encode(-2.5, f), 0xC2);
  EXPECT_EQ(fp8_encode(0.0, f), 0x00);
  EXPECT_EQ(fp8_encode(-0.0, f), 0x80);
  EXPECT_EQ(fp8_encode(0x1p-6, f), 0x08);   // smallest normal
  EXPECT_EQ(fp8_encode(0x1p-9, f), 0x01);   // smallest subnormal
  EXPECT_EQ(fp8_encode(0x1p-10, f), 0x00);  // half of it: tie to even zero
  EXPECT_EQ(fp8_encode(3 * 0x1p-10, f), 0x02);
  EXPECT_EQ(fp8_encode(-0x1p-11, f), 0x80);  // underflow keeps the sign
  EXPECT_EQ(fp8_max(f), 448.0);
  EXPECT_EQ(fp8_decode(0x7E, f), 448.0);
  EXPECT_EQ(fp8_decode(0xFE, f), -448.0);
  EXPECT_EQ(fp8_decode(0x01, f), 0x1p-9);
}

TEST(Fp8E4m3fn, Saturates) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fn;
  EXPECT_EQ(fp8_encode(1e6, f), 0x7E);
  EXPECT_EQ(fp8_encode(-1e6, f), 0xFE);
  EXPECT_EQ(round_fp8(1e6, f), 448.0);
  EXPECT_EQ(round_fp8(-1e6, f), -448.0);
  EXPECT_EQ(fp8_encode(464.0001, f), 0x7E);
  EXPECT_EQ(fp8_encode(kInf, f), 0x7E);
  EXPECT_EQ(fp8_encode(-kInf, f), 0xFE);
  EXPECT_EQ(fp8_encode(1e300, f), 0x7E);
}

TEST(Fp8E4m3fnuz, KnownCodes) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fnuz;
  EXPECT_EQ(fp8_encode(1.0, f), 0x40);
  EXPECT_EQ(fp8_encode(-2.5, f), 0xCA);
  EXPECT_EQ(fp8_encode(0x1p-7, f), 0x08);   // smallest normal
  EXPECT_EQ(fp8_encode(0x1p-10, f), 0x01);  // smallest subnormal
  EXPECT_EQ(fp8_max(f), 240.0);
  EXPECT_EQ(fp8_decode(0x7F, f), 240.0);
  EXPECT_EQ(fp8_decode(0xFF, f), -240.0);
}

TEST(Fp8E4m3fnuz, NoNegativeZeroAndSingleNan) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fnuz;
  EXPECT_EQ(fp8_encode(-0.0, f), 0x00);
  EXPECT_EQ(fp8_encode(-0x1p-12, f), 0x00);  // rounds to -0, which is 0 here
  EXPECT_EQ(fp8_encode(0.0, f), 0x00);
  EXPECT_EQ(fp8_encode(kNan, f), 0x80);
  EXPECT_EQ(fp8_encode(-kNan, f), 0x80);
  EXPECT_TRUE(std::isnan(fp8_decode(0x80, f)));
  EXPECT_EQ(fp8_decode(0x00, f), 0.0);
}

TEST(Fp8E4m3fnuz, Saturates) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fnuz;
  EXPECT_EQ(fp8_encode(1e6, f), 0x7F);
  EXPECT_EQ(fp8_encode(-1e6, f), 0xFF);
  EXPECT_EQ(round_fp8(1e6, f), 240.0);
  EXPECT_EQ(round_fp8(-1e6, f), -240.0);
  EXPECT_EQ(fp8_encode(kInf, f), 0x7F);
  EXPECT_EQ(fp8_encode(-kInf, f), 0xFF);
}

TEST(Fp8EagerNan, OverflowBecomesNan) {
  const Fp8Flavor f = Fp8Flavor::kE4m3fnEagerNan;
  EXPECT_EQ(fp8_encode(448.0, f), 0x7E);
  EXPECT_EQ(fp8_encode(460.0, f), 0x7E);
  EXPECT_EQ(fp8_encode(464.0, f), 0x7E);  // tie between 448 and 480: even is 448
  EXPECT_EQ(fp8_encode(-464.0, f), 0xFE);
  EXPECT_EQ(fp8_encode(464.0001, f), 0x7F);
  EXPECT_EQ(fp8_encode(-464.0001, f), 0xFF);
  EXPECT_EQ(fp8_encode(std::nextafter(464.0, kInf), f), 0x7F);
  EXPECT_EQ(fp8_encode(1e6, f), 0x7F);
  EXPECT_EQ(fp8_encode(kInf, f), 0x7F);
  EXPECT_EQ(fp8_encode(-kInf, f), 0xFF);
  EXPECT_TRUE(std::isnan(round_fp8(500.0, f)));
  EXPECT_EQ(fp8_max(f), 448.0);
}

// Below the overflow point the eager variant and the saturating cast agree.
TEST(Fp8EagerNan, MatchesSaturatingBelowOverflow) {
  for (double x = -464.0; x <= 464.0; x += 0.0625) {
    EXPECT_EQ(fp8_encode(x, Fp8Flavor::kE4m3fnEagerNan), fp8_encode(x, Fp8Flavor::kE4m3fn))
        << "x = " << x;
  }
}

}  // namespace
}  // namespace qsa
