// Scalar formats shared by host and device code: bf16 travels as raw
// uint16_t bits and fp8 as uint8_t codes, so nothing depends on a vendor's
// bf16/fp8 types (which differ between HIP and CUDA and between versions).
//
// float -> bf16 rounds to nearest, ties to even, keeps NaN as the quiet NaN
// sign|0x7FC0 and carries overflow into +-inf: bit for bit what
// qsa::bf16_bits does for a value that is exactly a float.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#include "gpu/common/device_api.hpp"  // __host__ / __device__ and the bit-cast intrinsics
#define QSA_HD __host__ __device__
#else
#define QSA_HD
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define QSA_DEVICE_PASS 1
#endif

namespace qsa::gpu {

QSA_HD inline uint32_t float_bits(float x) {
#ifdef QSA_DEVICE_PASS
  return __float_as_uint(x);
#else
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

QSA_HD inline float bits_float(uint32_t u) {
#ifdef QSA_DEVICE_PASS
  return __uint_as_float(u);
#else
  float x = 0.0f;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

QSA_HD inline float bf16_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

QSA_HD inline uint16_t float_to_bf16_bits(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: canonical quiet NaN, sign kept
    return static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7fc0u);
  // Adding 0x7fff plus the kept LSB rounds half to even; a carry out of the
  // mantissa bumps the exponent, and past the largest finite value lands on
  // the inf pattern 0x7f80, as IEEE rounding does.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

QSA_HD inline float round_bf16(float x) { return bf16_to_float(float_to_bf16_bits(x)); }

// fp8 e4m3 decoding by bit manipulation (reference/core/fp8.hpp). `fnuz`
// selects AMD's e4m3fnuz (bias 8, NaN only 0x80); otherwise OCP e4m3fn (bias
// 7, NaN S.1111.111), which the eager-NaN flavour shares for decoding.
QSA_HD inline float fp8_e4m3_to_float(uint8_t code, bool fnuz) {
  const uint32_t sign = (static_cast<uint32_t>(code) & 0x80u) << 24;
  const uint32_t exp = (static_cast<uint32_t>(code) >> 3) & 0xfu;
  const uint32_t mant = static_cast<uint32_t>(code) & 0x7u;
  if (fnuz ? code == 0x80 : (code & 0x7f) == 0x7f) return bits_float(0x7fc00000u);
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - bias - 3), exact in fp32.
    const float mag = static_cast<float>(mant) * (fnuz ? 0x1p-10f : 0x1p-9f);
    return sign ? -mag : mag;
  }
  const uint32_t bias = fnuz ? 8u : 7u;
  return bits_float(sign | ((exp - bias + 127u) << 23) | (mant << 20));
}

}  // namespace qsa::gpu
