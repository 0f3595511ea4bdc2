// Octave compressed main-KV formats (spec section 8), one packed slot per
// (token, KV head).
//
// Encoding of one block x of n dims (n a power of two):
//   1. y = WHT_n(signs ⊙ x), orthonormal Walsh-Hadamard with fixed ±1 signs;
//   2. u = y / rms(y); c_i = nearest Lloyd-Max codebook entry to u_i
//      (codebooks below, for N(0,1)); ties go to the entry of lower index;
//   3. scale s = |y|^2 / (y · c) so that y · (s c) = |y|^2, stored as fp16.
//      An all-zero block stores s = 0 and code indices of the entry nearest 0
//      from above.
// Decoding: y' = fp16(s) c, x' = signs ⊙ WHT_n(y') (the orthonormal WHT is its
// own inverse).
//
// Block structure for head_dim D and rotary_dim R:
//   kK3V4:       K in D/64 blocks of 64; block 0 (the RoPE block, needs R == 64)
//                4-bit, the others 3-bit; V one block of D, 4-bit.
//   kK3V3:       as kK3V4 but V 3-bit.
//   kK3V3Compact: K one block of D, 3-bit; V one block of D, 3-bit.
//
// Slot layout (project-defined; engines' layouts differ in padding only):
//   [K codes, bit-packed LSB-first, block by block][K scales, fp16 LE, one per
//    K block][V codes][V scale, fp16 LE][zero padding to the slot size].
//   Slot sizes for D = 256: kK3V4 248 B, kK3V3 216 B (both padded to 8 B),
//   kK3V3Compact 196 B (padded to 4 B).
//
// Sign patterns are fixed per (format-independent) block size: entry i of the
// n-dim pattern is the sign of counter_normal(kOctaveSignSeed, "octave-signs-n", i).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace qsa {

enum class OctaveFormat { kK3V4, kK3V3, kK3V3Compact };

inline constexpr std::array<int, 8> kLloydMax3Bit = {-127, -79, -45, -14, 14, 45, 79, 127};
inline constexpr double kLloydMax3Divisor = 59.0;
inline constexpr std::array<int, 16> kLloydMax4Bit = {-126, -95, -74, -58, -43, -30, -18, -6,
                                                      6,    18,  30,  43,  58,  74,  95,  126};
inline constexpr double kLloydMax4Divisor = 46.0;
inline constexpr uint64_t kOctaveSignSeed = 0x0c7a5e5eedULL;

struct OctaveBlock {
  int first_dim;  // offset within the head vector
  int dims;       // a power of two
  int bits;       // 3 or 4
};

struct OctaveLayout {
  std::vector<OctaveBlock> k_blocks;
  std::vector<OctaveBlock> v_blocks;
  int slot_bytes = 0;
};

// Throws ConfigError when D / R do not allow the format (D not a power of two
// multiple of 64, or R != 64 for the per-block formats).
OctaveLayout octave_layout(OctaveFormat format, int head_dim, int rotary_dim);

// k, v: [head_dim] each; slot: [layout.slot_bytes].
void octave_encode(const OctaveLayout& layout, const double* k, const double* v, uint8_t* slot);
void octave_decode(const OctaveLayout& layout, const uint8_t* slot, double* k, double* v);

// In-place orthonormal fast Walsh-Hadamard transform of n = 2^m values.
void walsh_hadamard(double* x, int n);
// The fixed ±1 pattern of length n (a power of two).
const std::vector<double>& octave_signs(int n);

}  // namespace qsa
