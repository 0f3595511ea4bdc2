// Branch-free forms of the correctly rounded float operations an epilogue
// needs bit for bit: a division by a row's softmax sum, the sigmoid's
// reciprocal and the rounding to bf16. Each is exact on a stated range of
// inputs and clears a flag outside it, so a caller computes a lane's whole
// vector of outputs with no branch per element and repeats the plain
// operators only where the flag was cleared (the flags combine with `&` and
// `|`: `&&` made a branch of every test). Why: the compiler's own
// `x / y` and `1.0f / y` are correctly rounded too, but each carries a
// branch to a slow path, and those branches kept a lane's elements from
// overlapping (the prefill epilogue, docs/performance.md, twenty-first
// pass). NVIDIA only (inline PTX); include from .hip files inside
// `#if defined(QSA_GPU_CUDA)`. tests/gpu/common_test.cpp checks each form
// against the plain operator on the device.
#pragma once

#include <cfloat>
#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)

namespace qsa::gpu::exact {

// Quotients at least this large are far enough from the subnormal range
// for div_rn's argument (below it the float grid has fewer bits).
constexpr float kDivMin = 2.0f * FLT_MIN;

// RN(v / l) from rinv = RN(1 / l) in double, computed once per divisor
// (l > 0 and finite): v * rinv in double is within 2^-52 (relative) of
// v / l, and the quotient of two floats is at least about 2^-50 (relative)
// away from every midpoint of two floats (were it one, v = l * m would need
// an odd integer of 25 bits or more as its significand), so rounding it to
// float rounds v / l. Exact for v = 0 and where the quotient is finite and
// at least kDivMin; `ok` is cleared elsewhere.
__device__ inline float div_rn(float v, double rinv, bool& ok) {
  const float q = static_cast<float>(static_cast<double>(v) * rinv);
  ok &= (v == 0.0f) | ((fabsf(q) >= kDivMin) & (fabsf(q) <= FLT_MAX));
  return q;
}

// RN(1 / d) for d in [1, 2^126): the SFU's approximation and one Newton
// step, both in fp32 FMAs (the fast path of the compiler's division, whose
// FMA residual 1 - d r0 is exact). Checked against 1.0f / d for every float
// of that range (tests/gpu/common_test.cpp); `ok` is cleared outside it,
// NaN included.
__device__ inline float rcp_rn(float d, bool& ok) {
  float r0;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(r0) : "f"(d));
  const float e = fmaf(-d, r0, 1.0f);
  ok &= (d >= 1.0f) & (d < 0x1p126f);
  return fmaf(r0, e, r0);
}

// float_to_bf16_bits of lo (low half) and hi (high half) in one conversion
// (round to nearest even), equal to it for every float that is zero,
// normal or infinite (checked for all of them: tests/gpu/common_test.cpp).
__device__ inline uint32_t bf16x2_rn(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Whether bf16x2_rn rounds x as float_to_bf16_bits does.
__device__ inline bool bf16_rn_exact(float x) { return (x == 0.0f) | (fabsf(x) >= FLT_MIN); }

}  // namespace qsa::gpu::exact

#endif  // QSA_GPU_CUDA
