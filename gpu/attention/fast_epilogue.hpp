// The attention epilogue without a branch per element, shared by the
// tensor-core kernels that store a whole vector of a row's outputs at once
// (the prefill kernels' pair loop, the spread decode kernel's merge):
// store_gated's bits of softmax_normalized(x · v_scale, l) and the gated
// output, through the branch-free forms of gpu/common/exact_math.hpp.
// NVIDIA only (inline PTX): include from .hip files inside
// `#if defined(QSA_GPU_CUDA)`.
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu/attention/attention_tile.hpp"
#include "gpu/common/bf16.hpp"
#include "gpu/common/exact_math.hpp"

#if defined(QSA_GPU_CUDA)

namespace qsa::gpu::attn {

// kN adjacent elements of an output row as one vector access.
template <class T, int kN>
struct alignas(sizeof(T) * kN < 16 ? sizeof(T) * kN : 16) OutVec {
  T v[kN];
};

// The gates' sigmoids as outputs_fast uses them: RN(1 / (1 + exp(-g))),
// rounded to bf16 where a.round_sigmoid (gated_bits's rounding; the
// sigmoid is normal here). They depend on the gates alone, so a kernel can
// take them before its row's sums exist (the spread kernel's merge does,
// while it waits at its barrier). `ok` is cleared where rcp_rn leaves its
// range.
template <int kN>
__device__ inline void gate_sigmoids(const KernelArgs& a, const OutVec<uint16_t, kN>& gate, float (&sig)[kN],
                                     bool& ok) {
  static_assert(kN % 2 == 0, "elements in pairs: one bf16x2 conversion each");
#pragma unroll
  for (int k = 0; k < kN; ++k) sig[k] = exact::rcp_rn(1.0f + expf(-bf16_to_float(gate.v[k])), ok);
#pragma unroll
  for (int k = 0; k < kN; k += 2) {
    const uint32_t rs = exact::bf16x2_rn(sig[k], sig[k + 1]);
    sig[k] = a.round_sigmoid ? bits_float(rs << 16) : sig[k];
    sig[k + 1] = a.round_sigmoid ? bits_float(rs & 0xffff0000u) : sig[k + 1];
  }
}

// A lane's kN outputs of one row (x: its accumulators, l: its softmax sum,
// both finite; sig: gate_sigmoids' of its gates, sig_ok its flag), bit for
// bit store_gated's of softmax_normalized(x · v_scale, l): one double
// reciprocal of l per row, and no branch per element. False where an
// element left the exact forms' ranges (l = 0 among them); the caller then
// computes the lane's outputs the plain way.
// Why: the plain division and reciprocal each branch to a slow path per
// element, which kept the elements' long chains (the division, expf, the
// reciprocal, three roundings) from overlapping: at share 0.99 the prefill
// epilogue's pair loop drew 19% of the Hopper kernel's stall samples (ncu,
// docs/performance.md, twenty-first pass).
template <int kN>
__device__ inline bool outputs_fast(const KernelArgs& a, const OutVec<float, kN>& x, float l, const float (&sig)[kN],
                                    bool sig_ok, OutVec<float, kN>& out, OutVec<uint16_t, kN>& gated) {
  static_assert(kN % 2 == 0, "elements in pairs: one bf16x2 conversion each");
  if (!(l > 0.0f)) return false;
  const double rinv = 1.0 / static_cast<double>(l);
  bool ok = sig_ok;
#pragma unroll
  for (int k = 0; k < kN; ++k) out.v[k] = exact::div_rn(x.v[k] * a.v_scale, rinv, ok);
#pragma unroll
  for (int k = 0; k < kN; k += 2) {
    // attn_value's rounding (out is zero or normal here), selected rather
    // than branched over.
    const uint32_t ro = exact::bf16x2_rn(out.v[k], out.v[k + 1]);
    out.v[k] = a.round_output ? bits_float(ro << 16) : out.v[k];
    out.v[k + 1] = a.round_output ? bits_float(ro & 0xffff0000u) : out.v[k + 1];
    const float g0 = out.v[k] * sig[k], g1 = out.v[k + 1] * sig[k + 1];
    ok &= exact::bf16_rn_exact(g0) & exact::bf16_rn_exact(g1);
    const uint32_t r = exact::bf16x2_rn(g0, g1);
    gated.v[k] = static_cast<uint16_t>(r & 0xffffu);
    gated.v[k + 1] = static_cast<uint16_t>(r >> 16);
  }
  return ok;
}

// The same from the gates themselves.
template <int kN>
__device__ inline bool outputs_fast(const KernelArgs& a, const OutVec<float, kN>& x, float l,
                                    const OutVec<uint16_t, kN>& gate, OutVec<float, kN>& out,
                                    OutVec<uint16_t, kN>& gated) {
  float sig[kN];
  bool ok = true;
  gate_sigmoids(a, gate, sig, ok);
  return outputs_fast(a, x, l, sig, ok, out, gated);
}

// The same outputs the plain way (attn_value, softmax_normalized and
// gated_bits per element): where outputs_fast declines, or its inputs are
// not finite.
template <int kN>
__device__ inline void outputs_plain(const KernelArgs& a, const OutVec<float, kN>& x, float l,
                                     const OutVec<uint16_t, kN>& gate, OutVec<float, kN>& out,
                                     OutVec<uint16_t, kN>& gated) {
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    out.v[k] = attn_value(a, softmax_normalized(x.v[k] * a.v_scale, l));
    gated.v[k] = gated_bits(a, out.v[k], gate.v[k]);
  }
}

}  // namespace qsa::gpu::attn

#endif  // QSA_GPU_CUDA
