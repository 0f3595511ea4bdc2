#include "reference/core/fp8.hpp"

#include <cmath>
#include <limits>

namespace qsa {

namespace {

constexpr int kMantBits = 3;
constexpr uint8_t kSignBit = 0x80;

struct Fp8Format {
  int min_exp;         // unbiased exponent of the smallest normal: 1 - bias
  uint8_t max_finite;  // magnitude bits of the largest finite value
  bool saturate;       // false: overflow becomes NaN (eager-NaN variant)
  bool unsigned_zero;  // fnuz: 0x80 is NaN, so zero has one encoding
};

Fp8Format format_of(Fp8Flavor flavor) {
  switch (flavor) {
    case Fp8Flavor::kE4m3fn:
      return {-6, 0x7E, true, false};
    case Fp8Flavor::kE4m3fnuz:
      return {-7, 0x7F, true, true};
    case Fp8Flavor::kE4m3fnEagerNan:
      return {-6, 0x7E, false, false};
  }
  return {-6, 0x7E, true, false};  // unreachable; keeps -Wreturn-type quiet
}

// The flavour's NaN; fn keeps the sign (S.1111.111), fnuz has only 0x80.
uint8_t nan_code(const Fp8Format& f, bool negative) {
  if (f.unsigned_zero) return kSignBit;
  return static_cast<uint8_t>(0x7F | (negative ? kSignBit : 0));
}

// Round-half-even of a non-negative double, independent of the FP environment.
double round_half_even(double r) {
  double fl = std::floor(r);
  double diff = r - fl;
  if (diff > 0.5) return fl + 1.0;
  if (diff < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

}  // namespace

uint8_t fp8_encode(double x, Fp8Flavor flavor) {
  const Fp8Format f = format_of(flavor);
  bool negative = std::signbit(x);
  if (std::isnan(x)) return nan_code(f, negative);
  uint8_t sign = negative ? kSignBit : 0;
  double a = std::fabs(x);

  // Magnitude bits before any overflow handling. With e = max(exponent of a,
  // min_exp), the neighbours of a are multiples of 2^(e - 3), so the rounded
  // significand is q = RNE(a / 2^(e - 3)) and ((e - min_exp) << 3) + q is the
  // code: normals carry their implicit bit into the exponent field, subnormals
  // (e == min_exp, q < 8) land in field 0, and q == 16 bumps the binade.
  // Anything from 2^10 up (inf included) is past every flavour's range.
  unsigned mag = 0xFFu;
  if (a < 1024.0) {
    int exp2 = 0;
    std::frexp(a, &exp2);
    int e = a == 0.0 ? f.min_exp : exp2 - 1;
    if (e < f.min_exp) e = f.min_exp;
    double q = round_half_even(std::ldexp(a, kMantBits - e));
    mag = (static_cast<unsigned>(e - f.min_exp) << kMantBits) + static_cast<unsigned>(q);
  }

  if (mag > f.max_finite) {
    // Rounded past the largest finite value: 464 ties down to 448 (even
    // significand) and stays finite, 464 + anything does not.
    if (!f.saturate) return nan_code(f, negative);
    mag = f.max_finite;
  }
  // fnuz has no negative zero: its bit pattern is the NaN.
  if (mag == 0 && f.unsigned_zero) return 0;
  return static_cast<uint8_t>(sign | mag);
}

double fp8_decode(uint8_t code, Fp8Flavor flavor) {
  const Fp8Format f = format_of(flavor);
  bool negative = (code & kSignBit) != 0;
  unsigned mag = code & 0x7Fu;
  if (f.unsigned_zero ? code == kSignBit : mag == 0x7Fu) {
    double nan = std::numeric_limits<double>::quiet_NaN();
    return negative ? -nan : nan;
  }
  unsigned exp_field = mag >> kMantBits;
  unsigned frac = mag & ((1u << kMantBits) - 1u);
  double value;
  if (exp_field == 0) {
    value = std::ldexp(static_cast<double>(frac), f.min_exp - kMantBits);
  } else {
    double significand = static_cast<double>(frac | (1u << kMantBits));
    value = std::ldexp(significand, static_cast<int>(exp_field) - 1 + f.min_exp - kMantBits);
  }
  return negative ? -value : value;
}

double fp8_max(Fp8Flavor flavor) { return fp8_decode(format_of(flavor).max_finite, flavor); }

}  // namespace qsa
