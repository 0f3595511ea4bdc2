// Hopper's bulk copies (the TMA unit's cp.async.bulk, global to shared
// memory) completing on an mbarrier in shared memory. A kernel that copies
// part of its rows this way and the rest by cp.async has both copy paths in
// flight at once: the spread decode kernel's V rows, since the thirty-first
// pass (docs/performance.md). Device code for sm_90a builds only
// (QSA_CUDA_SM90A); include from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA) && defined(QSA_CUDA_SM90A)

namespace qsa::gpu::sm90 {

// An mbarrier expecting `arrivals` arrivals per phase. Before any thread
// uses it: a block barrier (the init's fence makes it visible to the copy
// engine).
__device__ inline void mbarrier_init(uint32_t bar, int arrivals) {
  asm volatile(
      "mbarrier.init.shared.b64 [%0], %1;\n"
      "fence.mbarrier_init.release.cluster;\n" ::"r"(bar),
      "r"(arrivals)
      : "memory");
}

// One arrival that also expects `bytes` more copied bytes in this phase: a
// thread arrives before it issues its copy, so the phase cannot complete
// before the copy's bytes are counted.
__device__ inline void mbarrier_arrive_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits until the phase of parity `parity` has completed (all arrivals,
// all expected bytes landed); its copies' data is then visible to the
// waiting thread.
__device__ inline void mbarrier_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      " .reg .pred done;\n"
      "wait_%=:\n"
      " mbarrier.try_wait.parity.shared.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// `bytes` (a multiple of 16; dst and src 16-byte aligned) from global
// memory to this block's shared memory, completing on `bar`. Before it, a
// `fence.proxy.async.shared::cta` orders the thread's earlier ordinary
// accesses of dst (the copy engine is another proxy).
__device__ inline void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "fence.proxy.async.shared::cta;\n"
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

}  // namespace qsa::gpu::sm90

#endif
