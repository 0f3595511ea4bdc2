#include "reference/rope.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5eed0003;
constexpr int kHeadDim = 80;  // wider than kRotary so pass-through dims are checked
constexpr int kRotary = 64;
constexpr int kHalf = kRotary / 2;
constexpr double kTheta = 1e7;
constexpr std::array<int, 3> kQwenSection = {11, 11, 10};
constexpr std::array<int, 3> kPlain = {0, 0, 0};

std::vector<double> random_vector(int n, uint64_t seed, std::string_view name) {
  std::vector<double> v(n);
  const CounterRng rng(seed, name);
  for (int i = 0; i < n; ++i) v[i] = rng.normal(static_cast<uint64_t>(i));
  return v;
}

TensorD random_heads(int64_t tokens, int heads, uint64_t seed, std::string_view name) {
  TensorD t({tokens, heads, kHeadDim});
  const CounterRng rng(seed, name);
  // bf16 inputs, as the engines' activations are.
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data[i] = round_bf16(rng.normal(static_cast<uint64_t>(i)));
  return t;
}

RopeParams make_params(RopeStyle style = RopeStyle::kNeox, std::array<int, 3> section = kPlain) {
  RopeParams p;
  p.heads = 1;
  p.head_dim = kHeadDim;
  p.rotary_dim = kRotary;
  p.theta = kTheta;
  p.style = style;
  p.mrope_section = section;
  return p;
}

std::vector<double> rotated(const RopeParams& p, std::vector<double> x, int64_t t, int64_t h,
                            int64_t w) {
  const int64_t pos3[3] = {t, h, w};
  rope_row(p, pos3, x.data());
  return x;
}

std::vector<double> rotated(const RopeParams& p, const std::vector<double>& x, int64_t pos) {
  return rotated(p, x, pos, pos, pos);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(RopeTest, MropeAxisMapForQwenSection) {
  // h: j % 3 == 1 and j < 33; w: j % 3 == 2 and j < 30; t otherwise.
  const std::array<int, kHalf> expected = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0,
                                           1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1};
  int counts[3] = {0, 0, 0};
  for (int j = 0; j < kHalf; ++j) {
    EXPECT_EQ(mrope_axis(kQwenSection, j), expected[j]) << "[pair=" << j << "]";
    ++counts[mrope_axis(kQwenSection, j)];
  }
  // The map hands each axis exactly its section's number of pairs.
  EXPECT_EQ(counts[0], kQwenSection[0]);
  EXPECT_EQ(counts[1], kQwenSection[1]);
  EXPECT_EQ(counts[2], kQwenSection[2]);
  EXPECT_EQ(mrope_axis(kQwenSection, 29), 2);  // 29 % 3 == 2 and 29 < 30
  EXPECT_EQ(mrope_axis(kQwenSection, 30), 0);  // 30 % 3 == 0
  EXPECT_EQ(mrope_axis(kQwenSection, 31), 1);  // 31 % 3 == 1 and 31 < 33
  // The limits matter only for shorter sections: w stops at 3 * 2 = 6 here.
  const std::array<int, 3> tiny = {3, 3, 2};
  const std::array<int, 8> tiny_expected = {0, 1, 2, 0, 1, 2, 0, 1};
  for (int j = 0; j < 8; ++j)
    EXPECT_EQ(mrope_axis(tiny, j), tiny_expected[j]) << "[pair=" << j << "]";
  EXPECT_EQ(mrope_axis({4, 2, 2}, 7), 0);  // 7 % 3 == 1 but 7 >= 3 * 2
  EXPECT_EQ(mrope_axis(kPlain, 1), 0);
}

void expect_closed_form(RopeStyle style) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const RopeParams p = make_params(style);
  const std::vector<double> x = random_vector(kHeadDim, kSeed, "x");
  for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{4096}, int64_t{100003}}) {
    const std::vector<double> y = rotated(p, x, pos);
    for (int j = 0; j < kHalf; ++j) {
      const int a = style == RopeStyle::kNeox ? j : 2 * j;
      const int b = style == RopeStyle::kNeox ? j + kHalf : 2 * j + 1;
      const double angle = static_cast<double>(pos) * std::pow(kTheta, -2.0 * j / kRotary);
      const double c = std::cos(angle), s = std::sin(angle);
      const double tol = tol::rope_closed_form_tol(angle) * std::hypot(x[a], x[b]);
      EXPECT_NEAR(y[a], x[a] * c - x[b] * s, tol) << "[pos=" << pos << ", dim=" << a << "]";
      EXPECT_NEAR(y[b], x[b] * c + x[a] * s, tol) << "[pos=" << pos << ", dim=" << b << "]";
    }
    for (int d = kRotary; d < kHeadDim; ++d)
      EXPECT_EQ(y[d], x[d]) << "[pos=" << pos << ", dim=" << d << "]";
  }
}

TEST(RopeTest, ExactNeoxMatchesClosedForm) { expect_closed_form(RopeStyle::kNeox); }
TEST(RopeTest, ExactGptjMatchesClosedForm) { expect_closed_form(RopeStyle::kGptj); }

TEST(RopeTest, ExactPreservesNorm) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const RopeParams p = make_params();
  const std::vector<double> x = random_vector(kHeadDim, kSeed, "x");
  const CounterRng rng(kSeed, "positions");
  for (uint64_t i = 0; i < 16; ++i) {
    const int64_t pos = static_cast<int64_t>(rng.bits(i) % 300000);
    const std::vector<double> y = rotated(p, x, pos);
    EXPECT_NEAR(dot(y, y), dot(x, x), tol::rope_norm_rel_tol(kHeadDim) * dot(x, x))
        << "[pos=" << pos << "]";
  }
}

TEST(RopeTest, ExactDotDependsOnlyOnRelativePosition) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  const RopeParams p = make_params();
  const std::vector<double> q = random_vector(kHeadDim, kSeed, "q");
  const std::vector<double> k = random_vector(kHeadDim, kSeed, "k");
  const double qk_norm = std::sqrt(dot(q, q) * dot(k, k));
  const CounterRng rng(kSeed, "positions");
  for (uint64_t i = 0; i < 16; ++i) {
    const int64_t m = static_cast<int64_t>(rng.bits(3 * i) % 5000);
    const int64_t n = static_cast<int64_t>(rng.bits(3 * i + 1) % 5000);
    const int64_t d = static_cast<int64_t>(rng.bits(3 * i + 2) % 1000);
    const double base = dot(rotated(p, q, m), rotated(p, k, n));
    const double shifted = dot(rotated(p, q, m + d), rotated(p, k, n + d));
    // inv_freq of pair 0 is 1, so the largest angle is the largest position.
    const double max_angle = static_cast<double>(std::max(m, n) + d);
    EXPECT_NEAR(shifted, base, tol::rope_relative_dot_tol(kHeadDim, max_angle) * qk_norm)
        << "[m=" << m << ", n=" << n << ", d=" << d << "]";
  }
}

TEST(RopeTest, MropeRotatesEachPairByItsAxisPosition) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  RopeParams mrope = make_params(RopeStyle::kNeox, kQwenSection);
  mrope.angle = AngleMode::kFp32;
  mrope.cos_sin = CosSinDtype::kBf16;
  RopeParams plain = mrope;
  plain.mrope_section = kPlain;
  const std::vector<double> x = random_vector(kHeadDim, kSeed, "x");
  const int64_t pos3[3] = {70001, 123, 4567};
  const std::vector<double> y = rotated(mrope, x, pos3[0], pos3[1], pos3[2]);
  for (int j = 0; j < kHalf; ++j) {
    const std::vector<double> ref = rotated(plain, x, pos3[mrope_axis(kQwenSection, j)]);
    EXPECT_EQ(y[j], ref[j]) << "[pair=" << j << ", dim=" << j << "]";
    EXPECT_EQ(y[j + kHalf], ref[j + kHalf]) << "[pair=" << j << ", dim=" << j + kHalf << "]";
  }
}

TEST(RopeTest, EqualPositionRowsArePlainRope) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  constexpr int64_t kTokens = 6;
  constexpr int kHeads = 3;
  TensorI64 pos({3, kTokens});
  const CounterRng rng(kSeed, "positions");
  for (int64_t t = 0; t < kTokens; ++t) {
    const auto p = static_cast<int64_t>(rng.bits(t) % 300000);
    pos.at(0, t) = pos.at(1, t) = pos.at(2, t) = p;
  }
  for (AngleMode angle : {AngleMode::kExact, AngleMode::kFp32}) {
    RopeParams mrope = make_params(RopeStyle::kNeox, kQwenSection);
    mrope.heads = kHeads;
    mrope.angle = angle;
    RopeParams plain = mrope;
    plain.mrope_section = kPlain;
    TensorD a = random_heads(kTokens, kHeads, kSeed, "x");
    TensorD b = a;
    apply_rope(mrope, pos, a);
    apply_rope(plain, pos, b);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(a.data[i], b.data[i]) << "[element=" << i << "]";
  }
}

// Angle of rotation 1 relative to rotation 0, wrapped to (-pi, pi].
double angle_difference(double c0, double s0, double c1, double s1) {
  return std::atan2(s1 * c0 - c1 * s0, c1 * c0 + s1 * s0);
}

double worst_fp32_angle_error(int64_t position) {
  RopeParams exact = make_params();
  RopeParams fp32 = exact;
  fp32.angle = AngleMode::kFp32;
  double worst = 0.0;
  for (int j = 0; j < kHalf; ++j) {
    double c0, s0, c1, s1;
    rope_cos_sin(exact, position, j, &c0, &s0);
    rope_cos_sin(fp32, position, j, &c1, &s1);
    worst = std::max(worst, std::abs(angle_difference(c0, s0, c1, s1)));
  }
  return worst;
}

TEST(RopeTest, Fp32AnglesDriftAtLongContextAsEnginesDo) {
  // 261361 is the worst position below 262144; 262144 itself is a power of two.
  for (int64_t pos : {int64_t{262144}, int64_t{261361}}) {
    const double err = worst_fp32_angle_error(pos);
    EXPECT_GE(err, tol::kRopeFp32AngleErrMin262k) << "[pos=" << pos << "]";
    EXPECT_LE(err, tol::kRopeFp32AngleErrMax262k) << "[pos=" << pos << "]";
  }
  double worst_4k = 0.0;
  for (int64_t pos = 0; pos <= 4096; ++pos)
    worst_4k = std::max(worst_4k, worst_fp32_angle_error(pos));
  EXPECT_LT(worst_4k, tol::kRopeFp32AngleErrMax4k);
}

TEST(RopeTest, InvFreqPrecisionModes) {
  RopeParams exact = make_params();
  RopeParams fp32 = exact;
  fp32.angle = AngleMode::kFp32;
  RopeParams bf16 = exact;
  bf16.angle = AngleMode::kFp32Bf16InvFreq;
  for (int j = 0; j < kHalf; ++j) {
    const double ref = rope_inv_freq(exact, j);
    const double f = rope_inv_freq(fp32, j);
    const double b = rope_inv_freq(bf16, j);
    EXPECT_EQ(f, round_fp32(f)) << "[pair=" << j << "]";
    EXPECT_EQ(b, round_bf16(b)) << "[pair=" << j << "]";
    EXPECT_NEAR(f, ref, tol::kRopeFp32InvFreqRel * ref) << "[pair=" << j << "]";
    EXPECT_NEAR(b, ref, tol::kRopeBf16InvFreqRel * ref) << "[pair=" << j << "]";
  }
}

TEST(RopeTest, CosSinDtypesAreRepresentable) {
  RopeParams p = make_params();
  p.angle = AngleMode::kFp32;
  const CounterRng rng(kSeed, "positions");
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  for (uint64_t i = 0; i < 8; ++i) {
    const auto pos = static_cast<int64_t>(rng.bits(i) % 300000);
    for (int j = 0; j < kHalf; ++j) {
      double c32, s32, c16, s16;
      p.cos_sin = CosSinDtype::kFp32;
      rope_cos_sin(p, pos, j, &c32, &s32);
      p.cos_sin = CosSinDtype::kBf16;
      rope_cos_sin(p, pos, j, &c16, &s16);
      EXPECT_EQ(c32, round_fp32(c32)) << "[pos=" << pos << ", pair=" << j << "]";
      EXPECT_EQ(s32, round_fp32(s32)) << "[pos=" << pos << ", pair=" << j << "]";
      // bf16 cos/sin come from the fp32 cache, as vLLM builds it.
      EXPECT_EQ(c16, round_bf16(c32)) << "[pos=" << pos << ", pair=" << j << "]";
      EXPECT_EQ(s16, round_bf16(s32)) << "[pos=" << pos << ", pair=" << j << "]";
    }
  }
}

TEST(RopeTest, PerOpRoundingGivesBf16NearTheUnroundedRotation) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  RopeParams p = make_params(RopeStyle::kNeox, kQwenSection);
  p.angle = AngleMode::kFp32;
  p.cos_sin = CosSinDtype::kBf16;
  RopeParams per_op = p;
  per_op.per_op_rounding = true;
  RopeParams once = p;
  once.round_output = true;
  const CounterRng rng(kSeed, "positions");
  int differs_from_single_rounding = 0;
  for (uint64_t i = 0; i < 16; ++i) {
    const auto pos = static_cast<int64_t>(rng.bits(i) % 300000);
    const TensorD x = random_heads(1, 1, kSeed + i, "x");
    const std::vector<double> xv(x.data.begin(), x.data.end());
    const std::vector<double> exact = rotated(p, xv, pos);
    const std::vector<double> rounded = rotated(per_op, xv, pos);
    const std::vector<double> single = rotated(once, xv, pos);
    for (int d = 0; d < kHeadDim; ++d) {
      ASSERT_EQ(rounded[d], round_bf16(rounded[d])) << "[pos=" << pos << ", dim=" << d << "]";
      ASSERT_EQ(single[d], round_bf16(exact[d])) << "[pos=" << pos << ", dim=" << d << "]";
      if (d >= kRotary) {
        ASSERT_EQ(rounded[d], xv[d]) << "[pos=" << pos << ", dim=" << d << "]";
        continue;
      }
      const int j = d % kHalf;
      const double scale = std::abs(xv[j]) + std::abs(xv[j + kHalf]);
      ASSERT_NEAR(rounded[d], exact[d], tol::kRopePerOpRel * scale)
          << "[pos=" << pos << ", dim=" << d << "]";
      differs_from_single_rounding += rounded[d] != single[d];
    }
  }
  // Three roundings are not one: the flag must change some values.
  EXPECT_GT(differs_from_single_rounding, 0);
}

TEST(RopeTest, ApplyRopeSkipsPaddingAndMatchesRopeRow) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  constexpr int64_t kTokens = 7;
  constexpr int kHeads = 4;
  RopeParams p = make_params(RopeStyle::kNeox, kQwenSection);
  p.heads = kHeads;
  p.angle = AngleMode::kFp32;
  p.cos_sin = CosSinDtype::kBf16;
  p.round_output = true;
  TensorI64 pos({3, kTokens});
  const CounterRng rng(kSeed, "positions");
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int a = 0; a < 3; ++a) pos.at(a, t) = static_cast<int64_t>(rng.bits(3 * t + a) % 300000);
  }
  pos.at(0, 2) = -1;  // padding slots
  pos.at(0, 5) = -1;
  const TensorD x = random_heads(kTokens, kHeads, kSeed, "x");
  TensorD one = x, two = x;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  apply_rope(p, pos, one);
  omp_set_num_threads(2);
  apply_rope(p, pos, two);
  omp_set_num_threads(saved);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int h = 0; h < kHeads; ++h) {
      std::vector<double> ref(&x.at(t, h, 0), &x.at(t, h, 0) + kHeadDim);
      if (pos.at(0, t) >= 0) ref = rotated(p, ref, pos.at(0, t), pos.at(1, t), pos.at(2, t));
      for (int d = 0; d < kHeadDim; ++d) {
        ASSERT_EQ(one.at(t, h, d), ref[d])
            << "[token=" << t << ", head=" << h << ", dim=" << d << "]";
        ASSERT_EQ(two.at(t, h, d), ref[d])
            << "[token=" << t << ", head=" << h << ", dim=" << d << "]";
      }
    }
  }
}

TEST(RopeTest, BadShapesAndParamsThrow) {
  SCOPED_TRACE(fmt::format("seed = {:#x}", kSeed));
  RopeParams p = make_params(RopeStyle::kNeox, kQwenSection);
  p.heads = 2;
  TensorI64 pos({3, 4}, 5);
  TensorD x = random_heads(4, 2, kSeed, "x");
  TensorD wrong_heads = random_heads(4, 3, kSeed, "x");
  TensorD flat({4, 2 * kHeadDim});
  EXPECT_THROW(apply_rope(p, pos, wrong_heads), InputError);
  EXPECT_THROW(apply_rope(p, pos, flat), InputError);
  EXPECT_THROW(apply_rope(p, TensorI64({1, 4}, 5), x), InputError);
  EXPECT_THROW(apply_rope(p, TensorI64({3, 5}, 5), x), InputError);
  EXPECT_THROW(rope_inv_freq(p, kHalf), InputError);
  EXPECT_THROW(rope_inv_freq(p, -1), InputError);

  RopeParams odd = p;
  odd.rotary_dim = 63;
  EXPECT_THROW(apply_rope(odd, pos, x), ConfigError);
  RopeParams too_wide = p;
  too_wide.rotary_dim = kHeadDim + 2;
  EXPECT_THROW(apply_rope(too_wide, pos, x), ConfigError);
  RopeParams bad_section = p;
  bad_section.mrope_section = {11, 11, 11};
  EXPECT_THROW(apply_rope(bad_section, pos, x), ConfigError);
  RopeParams bad_theta = p;
  bad_theta.theta = 0.0;
  EXPECT_THROW(apply_rope(bad_theta, pos, x), ConfigError);
}

}  // namespace
}  // namespace qsa
