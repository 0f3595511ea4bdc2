// Thread block clusters (NVIDIA sm_90+) as inline PTX: the cluster barrier
// and reads of another block's shared memory (distributed shared memory).
// Include only from .hip files, inside `#if defined(QSA_GPU_CUDA)`; the
// functions trap when compiled for an older architecture, where launchers
// never form clusters (DeviceLimits::clusters is false there).
//
// A block may read another block's shared memory only between two cluster
// barriers that both blocks pass: the first orders the owner's writes
// before the reads (release / acquire), the second keeps the owner resident
// until every reader is done. A block that exits while a peer still reads
// its shared memory makes those reads undefined.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)

namespace qsa::gpu::sm90 {

// Every thread of every block of the cluster arrives, then waits; the
// block's shared-memory writes before it are visible to the cluster's reads
// after it. Must be reached by all threads of each block (.aligned).
__device__ inline void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// The float at shared-window address `addr` (of this block's layout) in the
// shared memory of the cluster's block `rank`.
__device__ inline float load_peer_shared(uint32_t addr, uint32_t rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t peer;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(peer) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(peer) : "memory");
  return v;
#else
  (void)addr;
  (void)rank;
  __trap();
  return 0.0f;
#endif
}

}  // namespace qsa::gpu::sm90

#endif
