// Element decoding and the top-k sort key of the select kernel, as
// __host__ __device__ inline functions: the kernel uses them on the device,
// and the host tests check them exhaustively against the reference codecs
// (qsa::bf16_value, qsa::fp8_decode, qsa::block_precedes) without a GPU.
//
// Everything here is bit manipulation on purpose: no vendor bf16/fp8 types,
// and no floating-point NaN tests that fast-math could fold away.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define QSA_SELECT_HD __host__ __device__
#else
#define QSA_SELECT_HD
#endif

#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define QSA_SELECT_DEVICE_PASS 1
#endif

namespace qsa::gpu::select_detail {

// Element type of index_q and of the compressed cache. The e4m3fn "eager
// NaN" flavour differs from e4m3fn only when encoding, so it decodes as kFp8Fn.
enum class CodeKind : int { kBf16 = 0, kFp8Fn = 1, kFp8Fnuz = 2 };

QSA_SELECT_HD inline float float_from_bits(uint32_t u) {
#ifdef QSA_SELECT_DEVICE_PASS
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

QSA_SELECT_HD inline uint32_t bits_from_float(float f) {
#ifdef QSA_SELECT_DEVICE_PASS
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

QSA_SELECT_HD inline bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

inline constexpr uint32_t kQuietNanBits = 0x7FC00000u;

// bf16 is the top half of an fp32: exact, NaN payloads kept.
QSA_SELECT_HD inline float bf16_to_float(uint32_t code) { return float_from_bits((code & 0xFFFFu) << 16); }

// e4m3fn (OCP): bias 7, S.1111.111 is NaN, no infinities, -0 exists.
// Normals map to an fp32 with exponent e - 7 + 127 = e + 120 and the three
// mantissa bits on top; subnormals are m * 2^-9, exact in fp32.
QSA_SELECT_HD inline float fp8_fn_to_float(uint32_t code) {
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t e = (code >> 3) & 0xFu;
  const uint32_t m = code & 0x7u;
  if (e == 0xFu && m == 0x7u) return float_from_bits(kQuietNanBits | sign);
  if (e == 0u) {
    const float v = static_cast<float>(m) * 0x1p-9f;
    return sign != 0u ? -v : v;
  }
  return float_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

// e4m3fnuz (AMD MI300): bias 8, 0x80 is the only NaN, no -0, no infinities.
QSA_SELECT_HD inline float fp8_fnuz_to_float(uint32_t code) {
  code &= 0xFFu;
  if (code == 0x80u) return float_from_bits(kQuietNanBits);
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t e = (code >> 3) & 0xFu;
  const uint32_t m = code & 0x7u;
  if (e == 0u) {
    const float v = static_cast<float>(m) * 0x1p-10f;
    return sign != 0u ? -v : v;
  }
  return float_from_bits(sign | ((e + 119u) << 23) | (m << 20));
}

template <CodeKind kKind>
QSA_SELECT_HD inline float decode_code(uint32_t code) {
  if constexpr (kKind == CodeKind::kBf16) {
    return bf16_to_float(code);
  } else if constexpr (kKind == CodeKind::kFp8Fn) {
    return fp8_fn_to_float(code);
  } else {
    return fp8_fnuz_to_float(code);
  }
}

// max(0, x) that keeps NaN (spec: a broken key must rank first, not vanish).
QSA_SELECT_HD inline float relu_keep_nan(float x) {
  if (is_nan_bits(bits_from_float(x))) return x;
  return x > 0.0f ? x : 0.0f;
}

// A 32-bit code whose unsigned order is the canonical score order: every
// NaN (any sign or payload) maps to the top, -0 and +0 map to the same code
// (the reference compares them equal, so their ties go by id), and the rest
// is the usual sign-flip trick that makes IEEE order an unsigned order.
QSA_SELECT_HD inline uint32_t orderable_score_bits(float score) {
  uint32_t u = bits_from_float(score);
  if (is_nan_bits(u)) return 0xFFFFFFFFu;
  if ((u & 0x7FFFFFFFu) == 0u) u = 0u;
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// 64-bit key: larger key = earlier in the canonical order (descending score,
// ties to the lower id). Ids are distinct, so keys are distinct, and every
// key is > 0 (the low half is 0xFFFFFFFF - id with id < 2^31), which lets 0
// serve as padding that sorts last.
QSA_SELECT_HD inline uint64_t select_key(float score, uint32_t id) {
  return (static_cast<uint64_t>(orderable_score_bits(score)) << 32) | (0xFFFFFFFFu - id);
}

QSA_SELECT_HD inline uint32_t select_key_id(uint64_t key) {
  return 0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu);
}

}  // namespace qsa::gpu::select_detail
