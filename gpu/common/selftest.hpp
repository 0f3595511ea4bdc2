// Device entry points that exist for tests of gpu/common (tests/gpu/
// common_test.cpp): the device-side conversions and wave primitives, run
// over arrays so the host can compare them with the reference codecs.
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

}  // namespace qsa::gpu
