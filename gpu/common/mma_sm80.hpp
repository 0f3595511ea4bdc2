// NVIDIA-only device helpers for tensor-core kernels (sm_80 and later,
// sm_90a included): the bf16 m16n8k16 and m16n8k8 and the f16 m16n8k16
// matrix multiply-accumulates, fp8 and f32 to f16 conversions, ldmatrix
// and cp.async with zero fill, as inline PTX. Include only from .hip files,
// and only inside `#if defined(QSA_GPU_CUDA)`: AMD builds keep the portable
// kernels, which is why every user of this header has a fallback.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// gq = lane / 4 and tq = lane % 4:
//   A 16x16 row-major: a0 = (gq, 2tq..2tq+1), a1 = (gq+8, 2tq..), a2 = (gq, 2tq+8..), a3 = (gq+8, 2tq+8..)
//   B 16x8 "col":      b0 = (k 2tq..2tq+1, n gq), b1 = (k 2tq+8.., n gq)
//   C 16x8 fp32:       c0, c1 = (gq, 2tq..2tq+1), c2, c3 = (gq+8, 2tq..)
// Each 32-bit register holds two bf16, the lower column in the low half.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"

#if defined(QSA_GPU_CUDA)

namespace qsa::gpu::sm80 {

__device__ inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// d += a * b for one 16x8x16 tile, fp32 accumulators.
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a * b for one 16x8x8 tile (A 16x8: a0 = (gq, 2tq..), a1 = (gq+8,
// 2tq..); B 8x8: b0 = (k 2tq..2tq+1, n gq)), fp32 accumulators.
__device__ inline void mma_bf16_k8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// The k16 shape with f16 operands (the fp8 cache's path: every e4m3 code is
// exact in f16, and one instruction widens two of them).
__device__ inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 bf16 matrices; lane l gives the shared-space address of row
// l % 8 of matrix l / 8 (16 contiguous bytes) and receives element
// (l / 4, 2 (l % 4)..+1) of each matrix in r[0..3]. Addresses are 32-bit
// shared-window offsets (smem_addr) so that per-call offsets fold into the
// instruction.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// The same, transposed: lane l receives elements (2 (l % 4)..+1, l / 4).
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(row));
}

// 16-byte asynchronous copy global -> shared (dst a shared-window address);
// with valid = false nothing is read and the 16 bytes are zero-filled (src
// must still be a valid address).
__device__ inline void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

// The same steered by a signed key: zero-filled, src not read, when
// key < 0 (an unattended cache slot). The predicate form costs one compare
// per copy; the size form above costs four when its flag comes from a
// comparison (ptxas turns `valid ? 16 : 0` back into a predicate).
__device__ inline void cp_async16_unless_negative(uint32_t dst, const void* src, int32_t key) {
  asm volatile(
      "{\n"
      " .reg .pred skip;\n"
      " setp.lt.s32 skip, %2, 0;\n"
      " cp.async.cg.shared.global [%0], [%1], 16, skip;\n"
      "}\n" ::"r"(dst),
      "l"(src), "r"(key));
}

// base + a·b, a·b a 32 x 32 -> 64-bit product. ptxas still emits a wide
// multiply and a 64-bit add, but written this way the add takes the whole
// per-lane base: the C++ form had it split into a uniform part and a lane
// part, one instruction more per address (cubin sizes, seventh pass).
__device__ inline const unsigned char* mad_wide_u32(uint32_t a, uint32_t b, const unsigned char* base) {
  uint64_t r;
  asm("mad.wide.u32 %0, %1, %2, %3;\n" : "=l"(r) : "r"(a), "r"(b), "l"(reinterpret_cast<uint64_t>(base)));
  return reinterpret_cast<const unsigned char*>(r);
}

// Two OCP e4m3 codes (the low 16 bits, low byte first) to two f16 (low half
// first), exactly, in one instruction (sm_89+).
__device__ inline uint32_t e4m3x2_to_f16x2(uint32_t two_codes) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(static_cast<uint16_t>(two_codes)));
  return h2;
}

// The same for the two codes in the high 16 bits, read as the register's
// upper half (a shift first costs one instruction per pair).
__device__ inline uint32_t e4m3x2_hi_to_f16x2(uint32_t four_codes) {
  uint32_t h2;
  asm("{\n"
      " .reg .b16 lo, hi;\n"
      " mov.b32 {lo, hi}, %1;\n"
      " cvt.rn.f16x2.e4m3x2 %0, hi;\n"
      "}\n"
      : "=r"(h2)
      : "r"(four_codes));
  return h2;
}

// Two floats to two f16 (lo in the low half), rounded to nearest even.
__device__ inline uint32_t f32x2_to_f16x2(float lo, float hi) {
  uint32_t h2;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(h2) : "f"(hi), "f"(lo));
  return h2;
}

// Brings the 128-byte line holding p into L2; never faults, loads nothing
// into registers or L1.
__device__ inline void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` of this thread's committed groups are in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace qsa::gpu::sm80

#endif  // QSA_GPU_CUDA
