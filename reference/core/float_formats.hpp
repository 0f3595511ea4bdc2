// Scalar storage formats: bf16, fp16 and fp32 rounding of fp64 values.
// All conversions round to nearest, ties to even, keep NaN as a quiet NaN and
// send values beyond the largest finite number to +-inf (IEEE behaviour, which
// is what torch's .to(bfloat16) / .half() do).
#pragma once

#include <cstdint>

namespace qsa {

uint16_t bf16_bits(double x);
double bf16_value(uint16_t bits);
inline double round_bf16(double x) { return bf16_value(bf16_bits(x)); }

uint16_t fp16_bits(double x);
double fp16_value(uint16_t bits);
inline double round_fp16(double x) { return fp16_value(fp16_bits(x)); }

inline double round_fp32(double x) { return static_cast<double>(static_cast<float>(x)); }

// Units in the last place at 1.0: the relative rounding bound is half of it.
inline constexpr double kBf16Eps = 1.0 / 128.0;      // 2^-7
inline constexpr double kFp16Eps = 1.0 / 1024.0;     // 2^-10
inline constexpr double kFp32Eps = 1.1920928955078125e-07;  // 2^-23

}  // namespace qsa
