// Wave (warp) level primitives for device code. The wave width is the
// `warpSize` builtin (HIP and CUDA both provide it; 64 on CDNA, 32 on NVIDIA
// and RDNA), never a literal; shuffles go through these wrappers because CUDA
// requires the *_sync forms with a lane mask and HIP has no mask argument.
// Include only from .hip files.
#pragma once

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

}  // namespace qsa::gpu
