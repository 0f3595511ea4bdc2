// NVIDIA Hopper-only device helpers (sm_90a): warpgroup matrix
// multiply-accumulates (wgmma.mma_async) with bf16 operands and fp32
// accumulators, their shared-memory matrix descriptors, and the fences
// they need. Include only from .hip files, inside `#if defined(QSA_GPU_CUDA)`;
// the instructions exist only where __CUDA_ARCH_FEAT_SM90_ALL is defined
// (device code compiled for sm_90a), so every user keeps a fallback:
// QSA_WGMMA says whether this pass of the compiler has them.
//
// A wgmma is issued by a warpgroup, 4 consecutive warps (128 threads) that
// all execute it. Fragment layouts (PTX ISA, "Asynchronous Warpgroup Level
// Matrix ..."), warp w of the group, gq = lane / 4, tq = lane % 4:
//   D 64xN fp32: d[4j + 0..1] = (row 16w + gq, cols 8j + 2tq..+1),
//                d[4j + 2..3] = (row 16w + gq + 8, same cols), j < N / 8;
//   A 64x16 from registers: a0 = (16w + gq, k 2tq..+1), a1 = (16w + gq + 8,
//                k 2tq..), a2 = (16w + gq, k 2tq + 8..), a3 = (16w + gq + 8,
//                k 2tq + 8..), two bf16 per register, the lower k low.
// Per warp these are exactly the m16n8k16 layouts of mma_sm80.hpp, so code
// written for one warp's m16 tile of mma.sync reads a wgmma's output as is.
//
// Shared-memory operands use the 128-byte swizzle, the only layout here:
// rows of 64 bf16 (128 bytes) in atoms of 8 rows (1024 bytes, 1024-byte
// aligned), the 16-byte piece c of row r stored at piece c ^ (r mod 8). A
// matrix wider than 64 elements along its contiguous dimension is a column
// of such atoms per 64 elements.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define QSA_WGMMA 1
#else
#define QSA_WGMMA 0
#endif

namespace qsa::gpu::sm90 {

// Byte offset of element (row, col) of a 128-byte-swizzled bf16 operand
// whose rows hold `rows` rows per 64-column atom column: the atom column
// (col / 64) is rows * 128 bytes, a row 128 bytes, and the 16-byte piece is
// swizzled by the row's index within its atom. col must be a multiple of 8
// (a 16-byte piece), the unit every copy here moves.
__host__ __device__ constexpr uint32_t sw128_offset(int rows, int row, int col) {
  return static_cast<uint32_t>((col / 64) * rows * 128 + row * 128 +
                               ((((col % 64) / 8) ^ (row % 8)) * 16));
}

// A shared-memory matrix descriptor: start address (a shared-window byte
// address), leading and stride byte offsets, 128-byte swizzle. Fields are
// in 16-byte units: start in bits 0-13, LBO in 16-29, SBO in 32-45, the
// swizzle mode (1: 128 bytes) in 62-63; base offset 0 (atoms 1024-aligned).
__device__ inline uint64_t sw128_desc(uint32_t start, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((start >> 4) & 0x3fffu) | static_cast<uint64_t>((lbo_bytes >> 4) & 0x3fffu) << 16 |
         static_cast<uint64_t>((sbo_bytes >> 4) & 0x3fffu) << 32 | uint64_t{1} << 62;
}

#if QSA_WGMMA

// Orders this thread's earlier register writes (accumulators, A fragments)
// before the wgmmas that follow; required before the first wgmma that reads
// registers other instructions wrote.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending committed groups of this warpgroup are in flight.
template <int kPending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Pins registers a wgmma writes to this point of the program: the compiler
// sees a wgmma's outputs as ready when it is issued, so without this it may
// move their readers above the wait that makes them so (ptxas then
// serializes the wgmmas: warning C7514).
template <int kN>
__device__ inline void fence_operands(float (&r)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (plain stores,
// cp.async after its wait) visible to the async proxy that wgmma reads
// through; a barrier after it then publishes them to the warpgroup.
__device__ inline void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d += A B, A 64x16 and B 16x32 both from shared memory, K-major (the 16
// k-elements of a row contiguous), fp32 accumulators (16 per thread).
__device__ inline void wgmma_m64n32k16_ss(float (&d)[16], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      " .reg .pred acc;\n"
      " setp.ne.b32 acc, %18, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, acc, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// d += A B, A 64x16 from registers (a[4], the layout above), B 16x64 from
// shared memory MN-major (the 64 n-elements of a k-row contiguous: one
// atom column), fp32 accumulators: d[j][0..3] is the n8 tile j.
__device__ inline void wgmma_m64n64k16_rs_mn(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n"
      " .reg .pred acc;\n"
      " setp.ne.b32 acc, %37, 0;\n"
      " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, acc, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

#endif  // QSA_WGMMA

}  // namespace qsa::gpu::sm90

#endif  // QSA_GPU_CUDA
