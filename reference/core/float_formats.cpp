#include "reference/core/float_formats.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace qsa {

namespace {

// A binary format with an implicit leading bit, IEEE-style subnormals and an
// all-ones exponent field for inf/NaN.
struct BinaryFormat {
  int mant_bits;       // explicit fraction bits
  int min_exp;         // unbiased exponent of the smallest normal number
  uint32_t inf_bits;   // magnitude bits of +inf (exponent field all ones)
  uint32_t qnan_bits;  // magnitude bits of the canonical quiet NaN
  uint32_t sign_bit;
};

constexpr BinaryFormat kBf16{7, -126, 0x7F80u, 0x7FC0u, 0x8000u};
constexpr BinaryFormat kFp16{10, -14, 0x7C00u, 0x7E00u, 0x8000u};

// Round-half-even of a non-negative double to an integer. Written out rather
// than std::nearbyint so that the result never depends on the FP environment.
double round_half_even(double r) {
  double fl = std::floor(r);
  double diff = r - fl;  // exact: r and fl share the same binade or fl is 0
  if (diff > 0.5) return fl + 1.0;
  if (diff < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

// Rounds |x| once, directly from fp64 (no detour through fp32, which would
// round twice and occasionally break a tie the wrong way).
//
// With e = max(exponent of |x|, min_exp), the representable neighbours of |x|
// are the integer multiples of 2^(e - mant_bits), so q = RNE(|x| / 2^(e - m))
// is the rounded significand. Encoding q as ((e - min_exp) << m) + q gives the
// right bits for normals (q in [2^m, 2^(m+1)), the implicit bit carrying into
// the exponent field), for subnormals (e == min_exp, q < 2^m) and for a
// rounding that carries into the next binade (q == 2^(m+1)).
uint32_t encode(double x, const BinaryFormat& f) {
  uint32_t sign = std::signbit(x) ? f.sign_bit : 0u;
  if (std::isnan(x)) return sign | f.qnan_bits;
  double a = std::fabs(x);
  if (std::isinf(a)) return sign | f.inf_bits;
  if (a == 0.0) return sign;

  int exp2 = 0;
  std::frexp(a, &exp2);  // a = frac * 2^exp2 with frac in [0.5, 1)
  int e = exp2 - 1;
  if (e < f.min_exp) e = f.min_exp;
  // Values far beyond the format's range would overflow the integer below;
  // anything at or above 2^(max_exp + 1) is inf regardless of rounding.
  int max_exp = static_cast<int>(f.inf_bits >> f.mant_bits) + f.min_exp - 2;
  if (e > max_exp) return sign | f.inf_bits;

  double q = round_half_even(std::ldexp(a, f.mant_bits - e));
  uint64_t bits = (static_cast<uint64_t>(e - f.min_exp) << f.mant_bits) + static_cast<uint64_t>(q);
  if (bits >= f.inf_bits) return sign | f.inf_bits;  // rounded past the largest finite
  return sign | static_cast<uint32_t>(bits);
}

double decode(uint32_t bits, const BinaryFormat& f) {
  bool negative = (bits & f.sign_bit) != 0;
  uint32_t mag = bits & (f.sign_bit - 1u);
  uint32_t frac_mask = (1u << f.mant_bits) - 1u;
  uint32_t exp_field = mag >> f.mant_bits;
  uint32_t frac = mag & frac_mask;
  double value;
  if (mag >= f.inf_bits) {
    value = frac == 0 ? std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::quiet_NaN();
  } else if (exp_field == 0) {
    value = std::ldexp(static_cast<double>(frac), f.min_exp - f.mant_bits);
  } else {
    double significand = static_cast<double>(frac | (1u << f.mant_bits));
    value = std::ldexp(significand, static_cast<int>(exp_field) - 1 + f.min_exp - f.mant_bits);
  }
  return negative ? -value : value;
}

}  // namespace

uint16_t bf16_bits(double x) { return static_cast<uint16_t>(encode(x, kBf16)); }

double bf16_value(uint16_t bits) {
  // bf16 is the top half of an fp32, so the conversion is exact this way and
  // keeps NaN payloads, which the generic decoder would canonicalise.
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return static_cast<double>(f);
}

uint16_t fp16_bits(double x) { return static_cast<uint16_t>(encode(x, kFp16)); }

double fp16_value(uint16_t bits) { return decode(bits, kFp16); }

}  // namespace qsa
