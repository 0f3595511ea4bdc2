// Hopper's bulk copies (the TMA unit's cp.async.bulk, global to shared
// memory) completing on an mbarrier in shared memory. A kernel that copies
// part of its rows this way and the rest by cp.async has both copy paths in
// flight at once: the spread decode kernel's V rows, since the thirty-first
// pass (docs/performance.md). Call only from sm_90a device code (kernels
// that take this path where QSA_CUDA_SM90A is defined); compiled for an
// older architecture each function traps, so that a discarded `if
// constexpr` branch still compiles. CUDA builds; include from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QSA_SM90_ASM(...) asm volatile(__VA_ARGS__)
#else
#define QSA_SM90_ASM(...) asm volatile("trap;")
#endif

namespace qsa::gpu::sm90 {

// An mbarrier expecting `arrivals` arrivals per phase. Before any thread
// uses it: a block barrier (the init's fence makes it visible to the copy
// engine).
__device__ inline void mbarrier_init(uint32_t bar, int arrivals) {
  QSA_SM90_ASM(
      "mbarrier.init.shared.b64 [%0], %1;\n"
      "fence.mbarrier_init.release.cluster;\n" ::"r"(bar),
      "r"(arrivals)
      : "memory");
}

// One arrival that also expects `bytes` more copied bytes in this phase: a
// thread arrives before it issues its copy, so the phase cannot complete
// before the copy's bytes are counted.
__device__ inline void mbarrier_arrive_expect(uint32_t bar, uint32_t bytes) {
  QSA_SM90_ASM("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// Waits until the phase of parity `parity` has completed (all arrivals,
// all expected bytes landed); its copies' data is then visible to the
// waiting thread.
__device__ inline void mbarrier_wait(uint32_t bar, uint32_t parity) {
  QSA_SM90_ASM(
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
// memory to this block's shared memory, completing on `bar`, with no proxy
// fence before it: only for dst that no thread of the block has accessed
// by ordinary loads or stores since the block started (there is nothing to
// order): the spread kernel's first tile of V rows, which then issue
// without the fence's MEMBAR.ALL.CTA before each copy.
__device__ inline void bulk_copy_unfenced(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  QSA_SM90_ASM("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// The same after a `fence.proxy.async.shared::cta`, which orders the
// thread's earlier ordinary accesses of dst, and those other threads made
// visible to it by a block barrier, before the copy (the copy engine is
// another proxy).
__device__ inline void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  QSA_SM90_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
  bulk_copy_unfenced(dst, src, bytes, bar);
}

}  // namespace qsa::gpu::sm90

#undef QSA_SM90_ASM

#endif
