// Device entry points that exist for tests: of gpu/common (tests/gpu/
// common_test.cpp), the device-side conversions and wave primitives, run
// over arrays so the host can compare them with the reference codecs; and
// a kernel that holds multiprocessors for a while (tests/gpu/
// sparse_attention_spread_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/common/device_api.hpp"

namespace qsa::gpu {

// in: [n] float -> bits: [n] float_to_bf16_bits(in), back: [n] bf16_to_float(bits).
void bf16_convert_on_device(const float* in, uint16_t* bits, float* back, size_t n, hipStream_t stream);

// codes: [n] fp8 e4m3 codes -> out: [n] decoded values (fnuz: e4m3fnuz, else e4m3fn).
void fp8_decode_on_device(const uint8_t* codes, float* out, size_t n, bool fnuz, hipStream_t stream);

// Results of one block of `threads` threads running the wave primitives:
// out: [5] = {warpSize, max over waves of wave_sum(lane + 1), wave_max(lane)
// of wave 0, wave_min(100 - lane) of wave 0, number of waves}.
void wave_probe_on_device(int threads, int* out, hipStream_t stream);

// Checks of gpu/common/exact_math.hpp's branch-free forms against the plain
// operators on the device (NVIDIA only: exact_math_checks_exist() is false
// elsewhere and the checks return zero counts). `checked` inputs were in
// the form's range, `mismatched` of them gave other bits than the plain
// operator (first_bad: the bits of one such input).
struct ExactMathCounts {
  uint64_t checked = 0, mismatched = 0;
  uint64_t first_bad = 0;
};
bool exact_math_checks_exist();
// exact::rcp_rn against 1.0f / d for every float d in [1, 2^126), and its
// flag on d = 2^126, inf, NaN and 0.5 (each counted as a mismatch if kept).
ExactMathCounts check_exact_rcp_on_device(hipStream_t stream);
// exact::bf16x2_rn against float_to_bf16_bits for every float bf16_rn_exact
// accepts (both halves), and bf16_rn_exact against its contract.
ExactMathCounts check_exact_bf16_on_device(hipStream_t stream);
// exact::div_rn(v, 1 / l) against v / l on n pairs of random bits (v any
// float, l positive and finite), counter-based from seed.
ExactMathCounts check_exact_div_on_device(uint64_t seed, uint64_t n, hipStream_t stream);

// Holds `blocks` multiprocessors of the current device (one block of one
// wave each, kept alone by shared memory past half a multiprocessor's)
// until *release is nonzero or about `seconds` have passed, and returns at
// once: a test of a launch whose blocks wait for each other can leave it
// too few free multiprocessors. Run it on a non-blocking stream, or the
// null stream's work waits for it.
void hold_multiprocessors(int blocks, const int* release, double seconds, hipStream_t stream);

}  // namespace qsa::gpu
