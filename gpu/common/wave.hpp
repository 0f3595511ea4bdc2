// Wave (warp) level primitives for device code. The wave width is the
// `warpSize` builtin (HIP and CUDA both provide it; 64 on CDNA, 32 on NVIDIA
// and RDNA), never a literal; shuffles go through these wrappers because CUDA
// requires the *_sync forms with a lane mask and HIP has no mask argument.
// Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

namespace qsa::gpu {

// The narrowest wave any supported device has; only used to size per-wave
// scratch arrays (an upper bound on the number of waves in a block).
inline constexpr int kMinWaveSize = 32;

template <class T>
__device__ inline T wave_shfl_xor(T v, int lane_mask) {
#if defined(QSA_GPU_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

// Orders shared-memory accesses among the lanes of a wave (a read by one
// lane before, a write by another after). CUDA lanes may diverge
// (independent thread scheduling) and need __syncwarp; a HIP wave executes
// in lockstep, where the compiler barrier suffices.
__device__ inline void wave_barrier() {
#if defined(QSA_GPU_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_wave_barrier();
#endif
}

// Butterfly reductions: every lane ends with the result. The whole wave must
// be converged and active.
__device__ inline float wave_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += wave_shfl_xor(v, offset);
  return v;
}

__device__ inline float wave_max(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, wave_shfl_xor(v, offset));
  return v;
}

__device__ inline int wave_min(int v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v = min(v, wave_shfl_xor(v, offset));
  return v;
}

// True in every thread when `pred` is true in any thread of the block; also
// a block-wide barrier. Both HIP and CUDA provide __syncthreads_or.
__device__ inline bool block_any(bool pred) { return __syncthreads_or(pred ? 1 : 0) != 0; }

__device__ inline int lane_id() { return static_cast<int>(threadIdx.x) % warpSize; }
__device__ inline int wave_id() { return static_cast<int>(threadIdx.x) / warpSize; }
__device__ inline int waves_per_block() { return (static_cast<int>(blockDim.x) + warpSize - 1) / warpSize; }

// Ballots: the lane masks that let one lane per wave stand in for every
// lane that would otherwise hit the same shared-memory counter (the select
// top-k's histograms). One bit per lane: 32 on NVIDIA, up to 64 on AMD.
#if defined(QSA_GPU_CUDA)
using LaneMask = uint32_t;
#else
using LaneMask = unsigned long long;
#endif

__device__ inline LaneMask wave_ballot(bool pred) {
#if defined(QSA_GPU_CUDA)
  return __ballot_sync(0xffffffffu, pred);
#else
  return __ballot(pred ? 1 : 0);
#endif
}

__device__ inline int lane_count(LaneMask m) {
#if defined(QSA_GPU_CUDA)
  return __popc(m);
#else
  return static_cast<int>(__popcll(m));
#endif
}

// The lowest set lane of a non-zero mask.
__device__ inline int first_lane(LaneMask m) {
#if defined(QSA_GPU_CUDA)
  return __ffs(static_cast<int>(m)) - 1;
#else
  return static_cast<int>(__ffsll(m)) - 1;
#endif
}

// The lanes below this one.
__device__ inline LaneMask lanes_below() { return (LaneMask{1} << lane_id()) - 1; }

// v as lane `src` holds it (src in [0, warpSize)).
__device__ inline uint32_t wave_read_lane(uint32_t v, int src) {
#if defined(QSA_GPU_CUDA)
  return __shfl_sync(0xffffffffu, v, src);
#else
  return __shfl(v, src);
#endif
}

// The sum of v over this lane and the lanes above it (lane_id() passed in:
// callers compute it once). The whole wave must be converged and active.
__device__ inline uint32_t wave_suffix_sum(uint32_t v, int lane) {
  for (int off = 1; off < warpSize; off <<= 1) {
    const bool inside = lane + off < warpSize;
    const uint32_t up = wave_read_lane(v, inside ? lane + off : lane);
    if (inside) v += up;
  }
  return v;
}

}  // namespace qsa::gpu
