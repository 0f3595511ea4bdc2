// fp8 e4m3 codecs (spec section 4). Three flavours:
//  - kE4m3fn: NVIDIA's OCP e4m3fn. Bias 7, max 448, no infinities, NaN is
//    S.1111.111. Encoding saturates to +-448 with round-to-nearest-even (the
//    Triton cast engines use).
//  - kE4m3fnuz: AMD MI300's. Bias 8, max 240, no infinities, no negative zero,
//    the single NaN is 0x80. Saturating round-to-nearest-even.
//  - kE4m3fnEagerNan: e4m3fn codes, but values whose rounded magnitude
//    exceeds 448 (so |x| > 464, the midpoint to the next binade step) become
//    NaN instead of saturating, as older PyTorch eager casts did.
// NaN inputs encode to the flavour's NaN. The encoded value is code * 1: any
// scale is applied by the caller (KV caches store fp8(x / scale)).
#pragma once

#include <cstdint>

namespace qsa {

enum class Fp8Flavor { kE4m3fn, kE4m3fnuz, kE4m3fnEagerNan };

uint8_t fp8_encode(double x, Fp8Flavor flavor);
double fp8_decode(uint8_t code, Fp8Flavor flavor);
inline double round_fp8(double x, Fp8Flavor flavor) { return fp8_decode(fp8_encode(x, flavor), flavor); }

// Largest finite magnitude: 448 for the fn flavours, 240 for fnuz.
double fp8_max(Fp8Flavor flavor);
// Relative spacing at 1.0 (2^-3): rounding error is at most half of it for
// normal values.
inline constexpr double kFp8Eps = 0.125;

}  // namespace qsa
