// Storage encoders of the prepare kernel as __host__ __device__ functions:
// the kernel uses them on the device, and the tests check them against the
// reference codecs (qsa::bf16_bits, qsa::fp8_encode) without a GPU.
//
// The reference rounds fp64 values straight to bf16 or fp8. Going through
// fp32 first would round twice and could break a tie the other way, so the
// fp64 -> fp32 step here rounds to odd: an inexact result keeps a sticky
// last bit, and fp32 has 16 (bf16) or 20 (fp8) bits more than the target,
// which makes the second, round-to-nearest-even step exact (the classic
// round-to-odd argument). Everything is integer bit manipulation, so host
// and device agree bit for bit and no libm or rounding mode is involved.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"

namespace qsa::gpu::prepare_detail {

// fp8 flavours as the kernel sees them (qsa::Fp8Flavor's order).
enum class Fp8Kind : int { kE4m3fn = 0, kE4m3fnuz = 1, kE4m3fnEagerNan = 2 };

// fp64 -> fp32 rounded to odd (NaN stays NaN, +-inf stays +-inf).
QSA_HD inline float float_round_odd(double x) {
  const float f = static_cast<float>(x);
  const double back = static_cast<double>(f);
  if (back == x || x != x) return f;  // exact, or NaN
  uint32_t bits = float_bits(f);
  const double mag_f = back < 0 ? -back : back;
  const double mag_x = x < 0 ? -x : x;
  // Sign-magnitude bits order magnitudes like integers: one step back moves
  // a result rounded away from zero (inf included) to the truncated one.
  if (mag_f > mag_x) bits -= 1u;
  return bits_float(bits | 1u);
}

// fp64 -> bf16 bits, one correct rounding (what qsa::bf16_bits does).
QSA_HD inline uint16_t bf16_bits_from_double(double x) { return float_to_bf16_bits(float_round_odd(x)); }
QSA_HD inline double round_bf16_double(double x) {
  return static_cast<double>(bf16_to_float(bf16_bits_from_double(x)));
}

// fp32 -> fp8 e4m3, saturating round-to-nearest-even (or NaN past the range
// for the eager-NaN flavour): qsa::fp8_encode for every fp32 input.
QSA_HD inline uint8_t fp8_encode_float(float x, Fp8Kind kind) {
  const bool fnuz = kind == Fp8Kind::kE4m3fnuz;
  const bool saturate = kind != Fp8Kind::kE4m3fnEagerNan;
  const int min_exp = fnuz ? -7 : -6;  // unbiased exponent of the smallest normal
  const uint32_t max_finite = fnuz ? 0x7Fu : 0x7Eu;
  const uint32_t u = float_bits(x);
  const bool negative = (u >> 31) != 0;
  const uint32_t abits = u & 0x7FFFFFFFu;
  const uint8_t nan_code = fnuz ? uint8_t{0x80} : static_cast<uint8_t>(negative ? 0xFF : 0x7F);
  if (abits > 0x7F800000u) return nan_code;

  uint32_t mag = 0;
  const int exp = static_cast<int>(abits >> 23) - 127;  // fp32 subnormals: -127, far below fp8's range
  if (exp >= 10) {
    mag = 0xFFu;  // 2^10 and above (inf too) is past every flavour's range
  } else if (abits >= 0x00800000u) {
    // |x| = m * 2^(exp - 23) with the implicit bit in m. With e = max(exp,
    // min_exp) the fp8 neighbours are multiples of 2^(e - 3), so the rounded
    // significand is q = RNE(m / 2^shift), shift = 20 + e - exp; the code is
    // ((e - min_exp) << 3) + q (a carry to 16 bumps the binade by itself).
    const int e = exp < min_exp ? min_exp : exp;
    const int shift = 20 + e - exp;
    const uint32_t m = (abits & 0x7FFFFFu) | 0x800000u;
    uint32_t q = 0;
    if (shift < 25) {  // m < 2^24: from shift 25 on m / 2^shift < 1/2 rounds to 0
      q = m >> shift;
      const uint32_t rem = m & ((1u << shift) - 1u);
      const uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (q & 1u) != 0)) q += 1u;
    }
    mag = (static_cast<uint32_t>(e - min_exp) << 3) + q;
  }
  if (mag > max_finite) {
    if (!saturate) return nan_code;
    mag = max_finite;
  }
  if (mag == 0 && fnuz) return 0;  // fnuz has no negative zero: 0x80 is its NaN
  return static_cast<uint8_t>((negative ? 0x80u : 0u) | mag);
}

QSA_HD inline uint8_t fp8_encode_double(double x, Fp8Kind kind) { return fp8_encode_float(float_round_odd(x), kind); }

// Interleaved mRoPE: the position row (0 = t, 1 = h, 2 = w) of frequency
// pair j, as qsa::mrope_axis, with lim1 = 3 * section[1], lim2 = 3 * section[2].
QSA_HD inline int mrope_axis_of(int pair, int lim1, int lim2) {
  if (pair % 3 == 1 && pair < lim1) return 1;
  if (pair % 3 == 2 && pair < lim2) return 2;
  return 0;
}

}  // namespace qsa::gpu::prepare_detail
