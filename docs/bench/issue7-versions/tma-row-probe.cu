// Probe (issue 7, eighteenth pass; run on the H200 on 2026-12-02: PROBE OK): can TMA gather the prefill
// kernel's K/V rows straight into the 128-byte-swizzled layout its wgmma
// descriptors read (gpu/common/wgmma_sm90.hpp, sw128_offset)? TMA has no
// row gather, but a 2-D tensor map over the cache ([slots x G rows] x D
// bf16) with a box of 64 dims x 1 row and the 128-byte swizzle copies one
// row's atom column; the question is whether the swizzle of a one-row box
// written at row r of an atom follows the shared address (chunk ^ (r % 8),
// what the layout needs) or the box (row 0 of the box, so no swizzle). One
// CTA gathers 16 rows given by an id list, 4 boxes per row, onto one
// mbarrier, and the host compares every byte with sw128_offset's layout.
// Two of the 16 rows lie outside the map (row -1 and row kRows + 5), as
// the kernel's rows of slot -1 do: they must arrive as zeros and still
// count their bytes on the barrier (else the wait would never end: the
// wait gives up after about a second and says so).
// docs/performance.md, eighteenth pass, "What is left", says why it matters.
// Run on the H200 from the repository root:
//   nvcc -std=c++17 -arch=sm_90a -I. -o /tmp/tma-probe docs/bench/issue7-versions/tma-row-probe.cu && /tmp/tma-probe
// It prints "PROBE OK" or the first mismatches and "PROBE FAILED".
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#define QSA_GPU_CUDA 1
#include "gpu/common/wgmma_sm90.hpp"

using qsa::gpu::sm90::sw128_offset;

constexpr int D = 256, G = 2, kSlots = 2048, kRows = kSlots * G, kNT = 16;
constexpr int kTileBytes = kNT * D * 2;  // 16 rows of 512 bytes, as 4 atom columns of 16 x 128 bytes

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::printf("%s failed: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);        \
      return 2;                                                                               \
    }                                                                                         \
  } while (0)

__global__ void gather(const __grid_constant__ CUtensorMap map, const int* rows, unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
  const uint32_t tile = raw + pad;          // 1024-byte aligned: the atoms' base
  const uint32_t bar = tile + kTileBytes;   // the mbarrier, 8 bytes after the tile
  const int tid = static_cast<int>(threadIdx.x);
  // Poison the tile, so that a box that lands nowhere shows.
  for (int i = tid; i < kTileBytes / 4; i += blockDim.x)
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(tile + 4 * i), "r"(0xdeadbeefu));
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;");
  }
  asm volatile("fence.proxy.async.shared::cta;");  // the poison and the barrier, for the async proxy
  __syncthreads();
  if (tid == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kTileBytes));
    for (int r = 0; r < kNT; ++r)
      for (int c = 0; c < D / 64; ++c) {
        const uint32_t dst = tile + c * kNT * 128 + r * 128;  // row r of atom column c, unswizzled: the box's start
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
            "l"(reinterpret_cast<uint64_t>(&map)), "r"(64 * c), "r"(rows[r]), "r"(bar)
            : "memory");
      }
  }
  // Wait for phase 0 of the barrier: every box has landed (bounded, so a
  // missing byte count shows as HANG instead of a hung probe).
  uint32_t done = 0;
  for (long spin = 0; !done && spin < (1L << 24); ++spin) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar));
  }
  if (!done) {
    if (tid == 0) std::printf("HANG: the barrier's phase did not complete\n");
    return;
  }
  for (int i = tid; i < kTileBytes / 4; i += blockDim.x) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(tile + 4 * i));
    reinterpret_cast<uint32_t*>(out)[i] = v;
  }
}

int main() {
  // Element (row, d) holds a code that names both, so a misplaced piece shows where it came from.
  std::vector<uint16_t> cache(static_cast<size_t>(kRows) * D);
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < D; ++d) cache[static_cast<size_t>(r) * D + d] = static_cast<uint16_t>((r * 977 + d * 131) & 0xffff);
  std::vector<int> rows(kNT);
  for (int r = 0; r < kNT; ++r) rows[r] = ((r * 389 + 11) % kSlots) * G + (r & 1);  // slot * G + g, scattered
  rows[3] = -1;         // outside the map: zeros
  rows[9] = kRows + 5;

  uint16_t* d_cache = nullptr;
  int* d_rows = nullptr;
  unsigned char* d_out = nullptr;
  CHECK(cudaMalloc(&d_cache, cache.size() * 2));
  CHECK(cudaMalloc(&d_rows, kNT * sizeof(int)));
  CHECK(cudaMalloc(&d_out, kTileBytes));
  CHECK(cudaMemcpy(d_cache, cache.data(), cache.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_out, 0xab, kTileBytes));  // so that an early return shows
  CHECK(cudaMemcpy(d_rows, rows.data(), kNT * sizeof(int), cudaMemcpyHostToDevice));

  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    std::printf("cuTensorMapEncodeTiled not found\nPROBE FAILED\n");
    return 1;
  }
  CUtensorMap map{};
  const cuuint64_t dims[2] = {D, kRows};
  const cuuint64_t strides[1] = {D * 2};  // bytes between rows
  const cuuint32_t box[2] = {64, 1};      // one row's atom column: 128 bytes, the 128-byte swizzle's span
  const cuuint32_t elem[2] = {1, 1};
  const CUresult cr = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, d_cache, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (cr != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled: error %d\nPROBE FAILED\n", static_cast<int>(cr));
    return 1;
  }
  const int smem = kTileBytes + 1024 + 64;
  CHECK(cudaFuncSetAttribute(gather, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  gather<<<1, 128, smem>>>(map, d_rows, d_out);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(kTileBytes / 2);
  CHECK(cudaMemcpy(got.data(), d_out, kTileBytes, cudaMemcpyDeviceToHost));

  // The layout the wgmma descriptors read: element d of row r at sw128_offset(kNT, r, d rounded down to 8) + 2 (d % 8).
  int bad = 0, unswizzled = 0;
  for (int r = 0; r < kNT; ++r)
    for (int d = 0; d < D; ++d) {
      const bool outside = rows[r] < 0 || rows[r] >= kRows;
      const uint16_t want = outside ? 0 : cache[static_cast<size_t>(rows[r]) * D + d];
      const uint32_t at = sw128_offset(kNT, r, d / 8 * 8) + 2 * (d % 8);
      const uint32_t plain = (d / 64) * kNT * 128 + r * 128 + 2 * (d % 64);  // the same without the XOR
      if (got[plain / 2] == want) ++unswizzled;
      if (got[at / 2] != want && bad++ < 8)
        std::printf("row %d dim %d: want %04x at byte %u, found %04x\n", r, d, want, at, got[at / 2]);
    }
  std::printf("%d of %d elements misplaced; %d where an unswizzled box would put them\n", bad, kNT * D, unswizzled);
  std::printf(bad == 0 ? "PROBE OK\n" : "PROBE FAILED\n");
  return bad == 0 ? 0 : 1;
}
