// gpu/common against the reference codecs and itself:
//  - float -> bf16 on the device gives exactly qsa::bf16_bits for specials,
//    ties (both parities), near-ties, subnormals, overflow, NaNs and 2^17
//    random bit patterns, and decoding gives back the bf16 value; the host
//    path of the same inline functions agrees too;
//  - fp8 e4m3fn / e4m3fnuz decoding on the device equals qsa::fp8_decode for
//    all 256 codes;
//  - DeviceBuffer round-trips data and poison fills every element, also for
//    16- and 8-bit buffers of odd length;
//  - the wave size is queried (32 or 64), agrees between host and device, and
//    the wave reductions return the closed forms;
//  - gpu/common/exact_math.hpp's branch-free forms (NVIDIA): the reciprocal
//    equals 1.0f / d for every float of its range, the bf16 conversion equals
//    the codec for every zero, normal and infinite float, and the division
//    equals v / l on 2^28 random pairs; each flag drops outside its range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/common/bf16.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "gpu/common/selftest.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;

constexpr uint64_t kSeed = 0xb16b00b5ULL;

// Float inputs that exercise every branch of the rounding.
std::vector<float> bf16_inputs() {
  std::vector<uint32_t> bits = {
      0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u,  // +-0, +-1
      0x7f800000u, 0xff800000u,                            // +-inf
      0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu,  // NaNs: quiet, signalling, payloads
      0xff812345u, 0x7fffffffu,
      0x7f7fffffu, 0xff7fffffu,  // largest floats: round to inf
      0x7f7f7fffu, 0x7f7f8000u,  // below / at the midpoint to inf (odd LSB: the tie goes up)
      0x7f7effffu, 0x7f7e8000u,  // largest even bf16 region: the tie stays
      0x00800000u, 0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u,  // normal min, subnormals, ties
      0x3f808000u, 0x3f818000u,  // ties: even LSB stays, odd LSB rounds up
      0x3f808001u, 0x3f807fffu,  // just above / below a tie
  };
  const CounterRng rng(kSeed, "gpu.common.bf16");
  for (uint64_t i = 0; i < (1u << 16); ++i) bits.push_back(static_cast<uint32_t>(rng.bits(i)));
  for (uint64_t i = 0; i < (1u << 16); ++i) {
    // Exact ties and their neighbours around random bf16 values.
    const uint32_t base = static_cast<uint32_t>(rng.bits(i + (1u << 20))) & 0xffff0000u;
    bits.push_back(base | 0x8000u);
    bits.push_back(base | (0x7fffu + static_cast<uint32_t>(i % 3)));
  }
  std::vector<float> out;
  for (uint32_t b : bits) out.push_back(gpu::bits_float(b));
  return out;
}

TEST(GpuBf16, DeviceConversionMatchesReferenceBits) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const std::vector<float> in = bf16_inputs();
  DeviceBuffer<float> d_in(in), d_back(in.size());
  DeviceBuffer<uint16_t> d_bits(in.size());
  d_bits.poison(gpu::kPoisonBf16Pair);
  d_back.poison(gpu::kPoisonFloat);
  gpu::bf16_convert_on_device(d_in.get(), d_bits.get(), d_back.get(), in.size(), nullptr);
  const std::vector<uint16_t> bits = d_bits.download();
  const std::vector<float> back = d_back.download();
  int failures = 0;
  for (size_t i = 0; i < in.size() && failures < 10; ++i) {
    const uint16_t want = bf16_bits(static_cast<double>(in[i]));
    const uint32_t want_back = static_cast<uint32_t>(want) << 16;
    const bool ok = bits[i] == want && gpu::float_bits(back[i]) == want_back &&
                    gpu::float_to_bf16_bits(in[i]) == want;
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "input bits 0x" << std::hex << gpu::float_bits(in[i]) << ": device 0x" << bits[i]
                    << ", host inline 0x" << gpu::float_to_bf16_bits(in[i]) << ", reference 0x" << want
                    << ", decoded 0x" << gpu::float_bits(back[i]);
    }
  }
}

TEST(GpuFp8, DeviceDecodeMatchesReferenceForEveryCode) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  DeviceBuffer<uint8_t> d_codes(codes);
  DeviceBuffer<float> d_out(codes.size());
  for (Fp8Flavor flavor : {Fp8Flavor::kE4m3fn, Fp8Flavor::kE4m3fnuz, Fp8Flavor::kE4m3fnEagerNan}) {
    SCOPED_TRACE(testing::Message() << "flavor " << static_cast<int>(flavor));
    d_out.poison(gpu::kPoisonFloat);
    gpu::fp8_decode_on_device(d_codes.get(), d_out.get(), codes.size(), flavor == Fp8Flavor::kE4m3fnuz, nullptr);
    const std::vector<float> out = d_out.download();
    for (int c = 0; c < 256; ++c) {
      const double want = fp8_decode(static_cast<uint8_t>(c), flavor);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[c])) << "code " << c;
        EXPECT_NE(gpu::float_bits(out[c]), gpu::kPoisonFloat) << "code " << c << " not written";
      } else {
        EXPECT_EQ(static_cast<double>(out[c]), want) << "code " << c;
      }
      EXPECT_EQ(gpu::float_bits(out[c]), gpu::float_bits(gpu::fp8_e4m3_to_float(static_cast<uint8_t>(c),
                                                                                 flavor == Fp8Flavor::kE4m3fnuz)))
          << "host inline decode of code " << c;
    }
  }
}

TEST(GpuDeviceBuffer, RoundTripAndPoisonCoverEveryElement) {
  const CounterRng rng(kSeed, "gpu.common.buffer");
  std::vector<float> host(1001);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(rng.normal(i));
  DeviceBuffer<float> f(host);
  EXPECT_EQ(f.download(), host);
  f.poison(gpu::kPoisonFloat);
  for (float x : f.download()) EXPECT_EQ(gpu::float_bits(x), gpu::kPoisonFloat);

  DeviceBuffer<uint16_t> h(1001);  // odd length: the last word is half padding
  h.poison(gpu::kPoisonBf16Pair);
  for (uint16_t x : h.download()) EXPECT_EQ(x, gpu::kPoisonBf16);
  DeviceBuffer<uint8_t> b(7);
  b.poison(0x5a5a5a5au);
  for (uint8_t x : b.download()) EXPECT_EQ(x, 0x5a);

  DeviceBuffer<int32_t> moved(std::vector<int32_t>{1, 2, 3});
  DeviceBuffer<int32_t> target = std::move(moved);
  EXPECT_EQ(target.download(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(moved.size(), 0u);
  EXPECT_THROW(target.upload(std::vector<int32_t>{1, 2}), InternalError);
  DeviceBuffer<float> empty(0);
  EXPECT_TRUE(empty.download().empty());
}

TEST(GpuWave, SizeIsQueriedAndPrimitivesAgree) {
  const int w = gpu::wave_size();
  ASSERT_GT(w, 0);
  EXPECT_TRUE(w == 32 || w == 64) << "wave size " << w;
  constexpr int kThreads = 256;
  DeviceBuffer<int> out(5);
  gpu::wave_probe_on_device(kThreads, out.get(), nullptr);
  const std::vector<int> r = out.download();
  EXPECT_EQ(r[0], w) << "device warpSize";
  EXPECT_EQ(r[1], w * (w + 1) / 2) << "wave_sum of lane + 1";
  EXPECT_EQ(r[2], w - 1) << "wave_max of lane";
  EXPECT_EQ(r[3], 100 - (w - 1)) << "wave_min of 100 - lane";
  EXPECT_EQ(r[4], kThreads / w) << "waves per block";
}

// The exact forms decide bits of every prefill output (pf_outputs_fast), so
// each is checked where it claims to be exact, exhaustively where one
// argument makes that cheap.
std::string counts_text(const gpu::ExactMathCounts& c) {
  std::ostringstream os;
  os << c.checked << " checked, " << c.mismatched << " mismatched (first bad input 0x" << std::hex << c.first_bad
     << ")";
  return os.str();
}

TEST(GpuExactMath, ReciprocalIsCorrectlyRoundedOnItsWholeRange) {
  if (!gpu::exact_math_checks_exist()) GTEST_SKIP() << "exact_math.hpp is NVIDIA only";
  const gpu::ExactMathCounts c = gpu::check_exact_rcp_on_device(nullptr);
  EXPECT_EQ(c.checked, (uint64_t{126} << 23) + 4) << counts_text(c);  // every float of [1, 2^126), 4 outside
  EXPECT_EQ(c.mismatched, 0u) << counts_text(c);
}

TEST(GpuExactMath, Bf16ConversionMatchesTheCodecOnEveryZeroNormalAndInfiniteFloat) {
  if (!gpu::exact_math_checks_exist()) GTEST_SKIP() << "exact_math.hpp is NVIDIA only";
  const gpu::ExactMathCounts c = gpu::check_exact_bf16_on_device(nullptr);
  EXPECT_EQ(c.checked, uint64_t{1} << 32) << counts_text(c);
  EXPECT_EQ(c.mismatched, 0u) << counts_text(c);
}

TEST(GpuExactMath, DivisionMatchesTheOperatorOnRandomPairs) {
  if (!gpu::exact_math_checks_exist()) GTEST_SKIP() << "exact_math.hpp is NVIDIA only";
  constexpr uint64_t kPairs = uint64_t{1} << 28;
  SCOPED_TRACE(testing::Message() << "seed " << kSeed << ", " << kPairs << " pairs");
  const gpu::ExactMathCounts c = gpu::check_exact_div_on_device(kSeed, kPairs, nullptr);
  // About half the pairs have a quotient in div_rn's range (random exponents).
  EXPECT_GT(c.checked, kPairs / 4) << counts_text(c);
  EXPECT_EQ(c.mismatched, 0u) << counts_text(c);
}

}  // namespace
}  // namespace qsa
