// Octave codecs: layouts and slot sizes, the transform and sign pattern, a
// hand-derived golden slot (bit packing, tie rule, fp16 scales), and
// statistical round trips on fresh N(0,1) vectors.
#include "reference/core/octave.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr int kD = 256;
constexpr int kR = 64;

// Fixed by default, overridable with QSA_TEST_SEED, traced on failure.
uint64_t test_seed(uint64_t fallback) {
  const char* env = std::getenv("QSA_TEST_SEED");
  return env ? std::strtoull(env, nullptr, 0) : fallback;
}

std::vector<double> normal_vector(const CounterRng& rng, uint64_t first, int n) {
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = rng.normal(first + static_cast<uint64_t>(i));
  return x;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double err = 0.0;
  double ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  return std::sqrt(err / ref);
}

bool same_blocks(const std::vector<OctaveBlock>& a, const std::vector<OctaveBlock>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first_dim != b[i].first_dim || a[i].dims != b[i].dims || a[i].bits != b[i].bits)
      return false;
  }
  return true;
}

TEST(OctaveLayout, SlotSizesForReleasedModel) {
  EXPECT_EQ(octave_layout(OctaveFormat::kK3V4, kD, kR).slot_bytes, 248);
  EXPECT_EQ(octave_layout(OctaveFormat::kK3V3, kD, kR).slot_bytes, 216);
  EXPECT_EQ(octave_layout(OctaveFormat::kK3V3Compact, kD, kR).slot_bytes, 196);
}

TEST(OctaveLayout, BlockLists) {
  const std::vector<OctaveBlock> k_split = {{0, 64, 4}, {64, 64, 3}, {128, 64, 3}, {192, 64, 3}};
  OctaveLayout k3v4 = octave_layout(OctaveFormat::kK3V4, kD, kR);
  EXPECT_TRUE(same_blocks(k3v4.k_blocks, k_split));
  EXPECT_TRUE(same_blocks(k3v4.v_blocks, {{0, 256, 4}}));
  OctaveLayout k3v3 = octave_layout(OctaveFormat::kK3V3, kD, kR);
  EXPECT_TRUE(same_blocks(k3v3.k_blocks, k_split));
  EXPECT_TRUE(same_blocks(k3v3.v_blocks, {{0, 256, 3}}));
  OctaveLayout compact = octave_layout(OctaveFormat::kK3V3Compact, kD, kR);
  EXPECT_TRUE(same_blocks(compact.k_blocks, {{0, 256, 3}}));
  EXPECT_TRUE(same_blocks(compact.v_blocks, {{0, 256, 3}}));
}

TEST(OctaveLayout, OtherHeadDims) {
  // D = 128: K 32 + 24 codes + 4 scale bytes, V 64 + 2 = 126 -> 128.
  EXPECT_EQ(octave_layout(OctaveFormat::kK3V4, 128, 64).slot_bytes, 128);
  // D = 64 compact: 24 + 2 + 24 + 2 = 52, already a multiple of 4.
  EXPECT_EQ(octave_layout(OctaveFormat::kK3V3Compact, 64, 32).slot_bytes, 52);
}

TEST(OctaveLayout, RejectsUnsupportedDims) {
  for (OctaveFormat f : {OctaveFormat::kK3V4, OctaveFormat::kK3V3, OctaveFormat::kK3V3Compact}) {
    for (int d : {0, -256, 32, 192, 320}) {
      EXPECT_THROW(octave_layout(f, d, kR), ConfigError) << "head_dim " << d;
    }
  }
  EXPECT_THROW(octave_layout(OctaveFormat::kK3V4, kD, 32), ConfigError);
  EXPECT_THROW(octave_layout(OctaveFormat::kK3V3, kD, 128), ConfigError);
  EXPECT_THROW(octave_layout(OctaveFormat::kK3V3Compact, kD, 512), ConfigError);
  EXPECT_NO_THROW(octave_layout(OctaveFormat::kK3V3Compact, kD, 128));
  try {
    octave_layout(OctaveFormat::kK3V4, 192, kR);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim = 192"), std::string::npos) << e.what();
  }
}

TEST(WalshHadamard, OrthonormalAndSelfInverse) {
  const uint64_t seed = test_seed(7);
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  CounterRng rng(seed, "wht");
  for (int n = 1; n <= 1024; n *= 2) {
    SCOPED_TRACE(testing::Message() << "n = " << n);
    std::vector<double> x = normal_vector(rng, static_cast<uint64_t>(n), n);
    std::vector<double> y = x;
    walsh_hadamard(y.data(), n);
    double nx = 0.0;
    double ny = 0.0;
    for (int i = 0; i < n; ++i) {
      nx += x[i] * x[i];
      ny += y[i] * y[i];
    }
    EXPECT_NEAR(std::sqrt(ny / nx), 1.0, tol::kWhtRelL2);
    walsh_hadamard(y.data(), n);
    EXPECT_LE(rel_l2(y, x), tol::kWhtRelL2);
    // The first basis vector maps to the constant 1/sqrt(n) row.
    std::vector<double> e(n, 0.0);
    e[0] = 1.0;
    walsh_hadamard(e.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(e[i] * std::sqrt(n), 1.0, tol::kWhtRelL2) << "i " << i;
  }
  std::vector<double> bad(3, 1.0);
  EXPECT_THROW(walsh_hadamard(bad.data(), 3), ConfigError);
}

TEST(OctaveSigns, DeterministicPlusMinusOne) {
  for (int n : {64, 128, 256}) {
    const std::vector<double>& s = octave_signs(n);
    ASSERT_EQ(s.size(), static_cast<size_t>(n));
    EXPECT_EQ(&s, &octave_signs(n));  // cached, stable reference
    uint64_t stream = stream_id("octave-signs-" + std::to_string(n));
    int negatives = 0;
    for (int i = 0; i < n; ++i) {
      double want =
          counter_normal(kOctaveSignSeed, stream, static_cast<uint64_t>(i)) < 0.0 ? -1.0 : 1.0;
      EXPECT_EQ(s[i], want) << "n " << n << " i " << i;
      negatives += s[i] < 0.0 ? 1 : 0;
    }
    EXPECT_GT(negatives, 0);
    EXPECT_LT(negatives, n);
  }
  // Each size has its own stream, not a prefix of a longer pattern.
  const std::vector<double>& s64 = octave_signs(64);
  const std::vector<double>& s256 = octave_signs(256);
  EXPECT_FALSE(std::equal(s64.begin(), s64.end(), s256.begin()));
}

// y = [0, -1, +1, -1, ...] in the rotated space, so every code is known by
// hand: u = y / rms(y) = +-1.008 picks +-45/59 (indices 5/2) and +-43/46
// (11/4); u_0 = 0 sits exactly between two entries and takes the lower index
// (3: -14/59, 7: -6/46). Scales 46/43 and 59/45 round to fp16 0x3C47, 0x3D3F.
TEST(OctaveCodec, GoldenSlot) {
  // D = 64, kK3V3: K is the 4-bit RoPE block, V a 3-bit block; 60 B -> 64.
  OctaveLayout layout = octave_layout(OctaveFormat::kK3V3, 64, 64);
  ASSERT_EQ(layout.slot_bytes, 64);
  std::vector<double> y(64);
  for (int i = 0; i < 64; ++i) y[i] = i == 0 ? 0.0 : (i % 2 ? -1.0 : 1.0);
  // x = signs * WHT(y) is exact here (integer butterflies, scale 1/8), so the
  // encoder sees exactly this y.
  std::vector<double> x = y;
  walsh_hadamard(x.data(), 64);
  for (int i = 0; i < 64; ++i) x[i] *= octave_signs(64)[i];

  std::vector<uint8_t> slot(layout.slot_bytes, 0xEE);
  octave_encode(layout, x.data(), x.data(), slot.data());
  std::vector<uint8_t> want(64, 0);
  want[0] = 0x47;                               // nibbles: code 7 then code 4
  for (int i = 1; i < 32; ++i) want[i] = 0x4B;  // codes 11, 4
  want[32] = 0x47;                              // K scale 0x3C47, little-endian
  want[33] = 0x3C;
  want[34] = 0x53;  // 3-bit codes 3, 2, 5 (+ low bits of the next) LSB-first
  for (int i = 35; i < 58; ++i) want[i] = 0x55;  // 2, 5, 2, 5, ... repeating
  want[58] = 0x3F;                               // V scale 0x3D3F
  want[59] = 0x3D;
  for (int i = 0; i < 64; ++i) EXPECT_EQ(slot[i], want[i]) << "byte " << i;

  std::vector<double> k(64), v(64);
  octave_decode(layout, slot.data(), k.data(), v.data());
  // Back in the rotated space, the decoded values are fp16(s) * codebook.
  for (std::vector<double>* got : {&k, &v}) {
    for (int i = 0; i < 64; ++i) (*got)[i] *= octave_signs(64)[i];
    walsh_hadamard(got->data(), 64);
  }
  EXPECT_NEAR(k[0], fp16_value(0x3C47) * -6.0 / 46.0, tol::kWhtRelL2);
  EXPECT_NEAR(k[1], fp16_value(0x3C47) * -43.0 / 46.0, tol::kWhtRelL2);
  EXPECT_NEAR(v[0], fp16_value(0x3D3F) * -14.0 / 59.0, tol::kWhtRelL2);
  EXPECT_NEAR(v[2], fp16_value(0x3D3F) * 45.0 / 59.0, tol::kWhtRelL2);
}

TEST(OctaveCodec, AllZeroRoundTripsToZero) {
  for (OctaveFormat f : {OctaveFormat::kK3V4, OctaveFormat::kK3V3, OctaveFormat::kK3V3Compact}) {
    OctaveLayout layout = octave_layout(f, kD, kR);
    std::vector<double> zero(kD, 0.0);
    std::vector<uint8_t> slot(layout.slot_bytes, 0xEE);
    octave_encode(layout, zero.data(), zero.data(), slot.data());
    std::vector<double> k(kD, 1.0), v(kD, 1.0);
    octave_decode(layout, slot.data(), k.data(), v.data());
    for (int i = 0; i < kD; ++i) {
      EXPECT_EQ(k[i], 0.0) << "k dim " << i;
      EXPECT_EQ(v[i], 0.0) << "v dim " << i;
    }
  }
  // Codes of an all-zero block are the entry just above 0: 4 (3-bit: bytes
  // 0x24 0x49 0x92 repeating) and 8 (4-bit: 0x88).
  OctaveLayout compact = octave_layout(OctaveFormat::kK3V3Compact, kD, kR);
  std::vector<double> zero(kD, 0.0);
  std::vector<uint8_t> slot(compact.slot_bytes);
  octave_encode(compact, zero.data(), zero.data(), slot.data());
  const uint8_t pattern[3] = {0x24, 0x49, 0x92};
  for (int i = 0; i < 96; ++i) EXPECT_EQ(slot[i], pattern[i % 3]) << "byte " << i;
  EXPECT_EQ(slot[96], 0);
  EXPECT_EQ(slot[97], 0);
  OctaveLayout k3v4 = octave_layout(OctaveFormat::kK3V4, kD, kR);
  slot.assign(k3v4.slot_bytes, 0xEE);
  octave_encode(k3v4, zero.data(), zero.data(), slot.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(slot[i], 0x88) << "byte " << i;
}

class OctaveRoundTrip : public testing::TestWithParam<OctaveFormat> {};

// Fresh N(0,1) tokens: bounded distortion per bit width (aggregate and per
// block), x . x' = |x|^2 per block up to the fp16 scale, zero padding.
TEST_P(OctaveRoundTrip, NormalVectors) {
  const uint64_t seed = test_seed(0x0c7a7e57);
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (set QSA_TEST_SEED to override)");
  OctaveLayout layout = octave_layout(GetParam(), kD, kR);
  CounterRng rng(seed, "octave-roundtrip");
  constexpr int kTokens = 64;
  double err[5] = {0, 0, 0, 0, 0};  // indexed by bit width
  double ref[5] = {0, 0, 0, 0, 0};
  std::vector<uint8_t> slot(layout.slot_bytes);
  for (int t = 0; t < kTokens; ++t) {
    std::vector<double> k = normal_vector(rng, static_cast<uint64_t>(2 * t * kD), kD);
    std::vector<double> v = normal_vector(rng, static_cast<uint64_t>((2 * t + 1) * kD), kD);
    std::vector<double> k2(kD), v2(kD);
    octave_encode(layout, k.data(), v.data(), slot.data());
    octave_decode(layout, slot.data(), k2.data(), v2.data());
    int used = 0;
    for (const auto& blocks : {layout.k_blocks, layout.v_blocks}) {
      for (const OctaveBlock& b : blocks) used += b.dims * b.bits / 8 + 2;
    }
    for (int i = used; i < layout.slot_bytes; ++i) EXPECT_EQ(slot[i], 0) << "padding byte " << i;

    auto check = [&](const std::vector<OctaveBlock>& blocks, const std::vector<double>& x,
                     const std::vector<double>& x2, const char* which) {
      for (const OctaveBlock& b : blocks) {
        double e2 = 0.0, n2 = 0.0, dot = 0.0;
        for (int i = b.first_dim; i < b.first_dim + b.dims; ++i) {
          e2 += (x2[i] - x[i]) * (x2[i] - x[i]);
          n2 += x[i] * x[i];
          dot += x[i] * x2[i];
        }
        SCOPED_TRACE(testing::Message()
                     << "token " << t << " " << which << " block @" << b.first_dim);
        double block_bound =
            b.bits == 3 ? tol::kOctaveBlockRelL2Bits3 : tol::kOctaveBlockRelL2Bits4;
        EXPECT_LE(std::sqrt(e2 / n2), block_bound);
        EXPECT_NEAR(dot / n2, 1.0, tol::kOctaveDotRel);
        err[b.bits] += e2;
        ref[b.bits] += n2;
      }
    };
    check(layout.k_blocks, k, k2, "K");
    check(layout.v_blocks, v, v2, "V");
  }
  EXPECT_LE(std::sqrt(err[3] / ref[3]), tol::kOctaveRelL2Bits3);
  if (ref[4] > 0.0) {
    EXPECT_LE(std::sqrt(err[4] / ref[4]), tol::kOctaveRelL2Bits4);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, OctaveRoundTrip,
                         testing::Values(OctaveFormat::kK3V4, OctaveFormat::kK3V3,
                                         OctaveFormat::kK3V3Compact),
                         [](const testing::TestParamInfo<OctaveFormat>& p) {
                           switch (p.param) {
                             case OctaveFormat::kK3V4:
                               return std::string("k3v4");
                             case OctaveFormat::kK3V3:
                               return std::string("k3v3");
                             case OctaveFormat::kK3V3Compact:
                               return std::string("k3v3_compact");
                           }
                           return std::string("unknown");
                         });

}  // namespace
}  // namespace qsa
