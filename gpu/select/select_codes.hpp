// Element decoding and the top-k sort key of the select kernel, as
// __host__ __device__ inline functions: the kernel uses them on the device,
// and the host tests check them exhaustively against the reference codecs
// (qsa::bf16_value, qsa::fp8_decode, qsa::block_precedes) without a GPU.
//
// Everything here is bit manipulation on purpose: no vendor bf16/fp8 types,
// and no floating-point NaN tests that fast-math could fold away.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"

#define QSA_SELECT_HD QSA_HD

namespace qsa::gpu::select_detail {

// Element type of index_q and of the compressed cache. The e4m3fn "eager
// NaN" flavour differs from e4m3fn only when encoding, so it decodes as kFp8Fn.
enum class CodeKind : int { kBf16 = 0, kFp8Fn = 1, kFp8Fnuz = 2 };

QSA_SELECT_HD inline float float_from_bits(uint32_t u) { return bits_float(u); }
QSA_SELECT_HD inline uint32_t bits_from_float(float f) { return float_bits(f); }
QSA_SELECT_HD inline bool is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

inline constexpr uint32_t kQuietNanBits = 0x7FC00000u;

// The codecs are the shared ones of gpu/common/bf16.hpp (exact, by bit
// manipulation); codes arrive widened to 32 bits.
template <CodeKind kKind>
QSA_SELECT_HD inline float decode_code(uint32_t code) {
  if constexpr (kKind == CodeKind::kBf16) {
    return bf16_to_float(static_cast<uint16_t>(code & 0xFFFFu));
  } else {
    return fp8_e4m3_to_float(static_cast<uint8_t>(code & 0xFFu), kKind == CodeKind::kFp8Fnuz);
  }
}

// Code e of a 32-bit word of packed codes (little-endian, as both GPU
// vendors store them): bf16 e in {0, 1}, fp8 e in {0, 1, 2, 3}. Equals
// decode_code of that code, bit for bit.
template <CodeKind kKind>
QSA_SELECT_HD inline float decode_packed(uint32_t word, int e) {
  if constexpr (kKind == CodeKind::kBf16) {
    return float_from_bits(e == 0 ? word << 16 : word & 0xFFFF0000u);
  } else {
    return decode_code<kKind>((word >> (8 * e)) & 0xFFu);
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

// orderable_score_bits(score) >= code, for a code that orderable_score_bits
// returns, as one float compare (the top-k's gather tests every score of a
// row this way): both order the scores that are not NaN alike, -0 and +0
// together, and !(score < t) lets NaN scores, whose code is the largest,
// through. The NaN code lets only NaN scores through. Unlike the rest of
// this file it relies on IEEE compares, so on builds without fast-math (all
// of this project's); the host test and the GPU tests' NaN rows check it.
// Where denormals flush to zero the compare can only let more scores
// through, and those it lets through are still all the scores above some
// score.
struct ScoreAtLeast {
  float t;
  bool nan_only;
  QSA_SELECT_HD explicit ScoreAtLeast(uint32_t code)
      : t(code == 0xFFFFFFFFu ? float_from_bits(0x7F800000u)
                              : float_from_bits((code & 0x80000000u) != 0u ? code & 0x7FFFFFFFu : ~code)),
        nan_only(code == 0xFFFFFFFFu) {}
  QSA_SELECT_HD bool operator()(float score) const { return !(score < t) && !(nan_only && score == score); }
};

// The row histogram's bin of a score (select.hip's scorer counts, the
// top-k reads): the top kScoreBinBits bits of its orderable code, which is
// the top-k's first radix digit.
inline constexpr int kScoreBinBits = 12;
QSA_SELECT_HD inline uint32_t score_bin(float score) { return orderable_score_bits(score) >> (32 - kScoreBinBits); }

// The smallest score code in histogram bin `bin` (the code's top 12 bits),
// as a code ScoreAtLeast takes: a score passes ScoreAtLeast(bin_floor_code(
// bin)) exactly when its code's bin is >= bin. Bins past +inf's (0xFF8)
// hold only NaN's code, so their floor is that code: ScoreAtLeast of a
// positive NaN pattern would let every score through. (The bins below
// -inf's, 0 to 7, let every score through, which is also what their floor
// means: every code is at least theirs.)
QSA_SELECT_HD inline uint32_t bin_floor_code(uint32_t bin) {
  const uint32_t code = bin << (32 - kScoreBinBits);
  return code > 0xFF800000u ? 0xFFFFFFFFu : code;
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
