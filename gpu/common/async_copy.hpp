// Copies from global to shared memory that overlap other work: cp.async on
// NVIDIA (sm_80 and later), plain synchronous copies elsewhere, so callers
// keep one code path. A thread's copies form groups (async_commit); a
// thread waits for its own groups only (async_wait), so lanes that read each
// other's copies also need a wave or block barrier after the wait. Include
// only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)
#include "gpu/common/mma_sm80.hpp"
#endif

namespace qsa::gpu {

// Closes this thread's current group of copies; a no-op where copies are
// synchronous.
__device__ inline void async_commit() {
#if defined(QSA_GPU_CUDA)
  sm80::cp_async_commit();
#endif
}

// Waits until at most kPending of this thread's committed groups are in
// flight; a no-op where copies are synchronous.
template <int kPending>
__device__ inline void async_wait() {
#if defined(QSA_GPU_CUDA)
  sm80::cp_async_wait<kPending>();
#endif
}

// dst[0, 16) = src[0, 16), both 16-byte aligned, dst in shared memory.
__device__ inline void async_copy16(void* dst, const void* src) {
#if defined(QSA_GPU_CUDA)
  sm80::cp_async16(sm80::smem_addr(dst), src, true);
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}

}  // namespace qsa::gpu
