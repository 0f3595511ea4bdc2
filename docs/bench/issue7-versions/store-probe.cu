// Fifteenth pass (docs/performance.md), 2026-12-01, H200: the select scorer's grid, tile order,
// page table and score stores around a plain read of its 512 MiB of keys (no mma), to find what
// keeps the scorer from a read-only stream's speed; and what a 16 GiB free does to such a read.
// Not part of the build; on the H200:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o store_probe store-probe.cu
//   ./store_probe                 every variant, in a fresh process             ("scorer_like")
//   ./store_probe short [slow]    five variants, fresh or right after 16 GiB
//                                 were allocated, written and freed             ("after_free")
//   ./store_probe timeline [slow] a flat read timed every 10-250 ms for 3 s after
//                                 nothing or 16 GiB were freed                  ("after_free_timeline")
// Their output is in h200-2026-12-01-store-probes.json (the names in parentheses). The session ran
// the three modes as three copies of this file; this one holds all of them.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#include <chrono>
#include <cstring>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kRows = 64, kVisible = 32768, kRpp = 400, kPagesPerRow = (kVisible + kRpp - 1) / kRpp;  // 82

// TABLE: 0 rows contiguous per request, 1 shuffled pages through the table. STORE: write 4 B per key.
__device__ inline uint64_t policy_evict_first() { uint64_t p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ inline uint64_t policy_evict_last() { uint64_t p; asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p; }
__device__ inline uint4 ld_hint(const uint4* a, uint64_t pol) {
  uint4 v; asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(pol)); return v; }
__device__ inline void st_hint(float* a, float v, uint64_t pol) { asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" :: "l"(a), "f"(v), "l"(pol) : "memory"); }

// HINT bit 0: key loads evict_first; bit 1: score stores evict_last; bit 2: score stores .cs
template <int TABLE, int STORE, int AHEAD, int HINT = 0>
__global__ void __launch_bounds__(256, 2) scorer_like(const uint4* __restrict__ keys, const int32_t* __restrict__ table, float* scores, uint32_t* out) {
  const int lane = threadIdx.x & 31, wave = threadIdx.x >> 5;
  const int t = blockIdx.x;
  const int step = gridDim.y * 8 * 32;
  const int first = (blockIdx.y * 8 + wave) * 32;
  uint32_t acc = 0;
  const uint64_t ef = policy_evict_first(), el = policy_evict_last();
  int next_phys = TABLE ? table[t * kPagesPerRow + (first + lane) / kRpp] : 0;
  for (int b0 = first; b0 < kVisible; b0 += step) {
    const int b = b0 + lane;
    long long own;
    if (TABLE) {
      const int phys = AHEAD ? next_phys : table[t * kPagesPerRow + b / kRpp];
      own = (long long)phys * kRpp + b % kRpp;
      if (AHEAD && b0 + step < kVisible) next_phys = table[t * kPagesPerRow + (b + step) / kRpp];
    } else {
      own = (long long)t * kVisible + b;
    }
    const long long f = __shfl_sync(~0u, own, 0);
    const bool run = __all_sync(~0u, own == f + lane);
    uint4 v[16];
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int r = 2 * m + (lane >> 4);
      const long long row = run ? f + r : __shfl_sync(~0u, own, r);
      v[m] = (HINT & 1) ? ld_hint(keys + row * 16 + (lane & 15), ef) : keys[row * 16 + (lane & 15)];
    }
#pragma unroll
    for (int m = 0; m < 16; ++m) acc ^= v[m].x ^ v[m].y ^ v[m].z ^ v[m].w;
    if (STORE) {
      float* sp = scores + (size_t)t * kVisible + b;
      if (HINT & 2) st_hint(sp, __uint_as_float(acc), el);
      else if (HINT & 4) __stcs(sp, __uint_as_float(acc));
      else *sp = __uint_as_float(acc);
    }
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// The flat reference: warp w takes tiles w, w + W, ... of one 512 MiB run.
__global__ void flat(const uint4* __restrict__ p, int tiles, uint32_t* out) {
  uint32_t acc = 0;
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x / 32) * gridDim.y;
  const int w = (blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  for (int t = w; t < tiles; t += warps) {
    const uint4* q = p + size_t(t) * 512;
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) v[u] = q[u * 32 + lane];
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

int main(int argc, char** argv) {
  bool slow = false, short_list = false, timeline = false;
  for (int i = 1; i < argc; ++i) {
    slow |= std::strcmp(argv[i], "slow") == 0;
    short_list |= std::strcmp(argv[i], "short") == 0;
    timeline |= std::strcmp(argv[i], "timeline") == 0;
  }
  const size_t pages = size_t(kRows) * kPagesPerRow;
  const size_t set_bytes = pages * kRpp * 256;  // ~512 MiB
  uint4 *a, *b; float* scores; uint32_t* out;
  CK(cudaMalloc(&a, set_bytes)); CK(cudaMalloc(&b, set_bytes)); CK(cudaMalloc(&out, 4));
  CK(cudaMalloc(&scores, size_t(kRows) * kVisible * 4));
  CK(cudaMemset(a, 1, set_bytes)); CK(cudaMemset(b, 2, set_bytes));
  std::vector<int32_t> perm(pages); for (size_t i = 0; i < pages; ++i) perm[i] = int(i);
  std::mt19937 rng(11); std::shuffle(perm.begin(), perm.end(), rng);
  int32_t* table; CK(cudaMalloc(&table, pages * 4)); CK(cudaMemcpy(table, perm.data(), pages * 4, cudaMemcpyHostToDevice));
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  int flip = 0;
  auto flat_launch = [&] { flat<<<sms * 2, 256>>>((flip ^= 1) ? a : b, kRows * kVisible / 32, out); };
  if (timeline) {
    auto batch = [&] {
      cudaEventRecord(e0); for (int k = 0; k < 5; ++k) flat_launch();
      cudaEventRecord(e1); cudaEventSynchronize(e1); float m; cudaEventElapsedTime(&m, e0, e1); return m / 5 * 1e3;
    };
    for (int k = 0; k < 5; ++k) batch();
    printf("before: %.1f us\n", batch());
    void* big = nullptr;
    if (slow) { CK(cudaMalloc(&big, size_t{16} << 30)); CK(cudaMemset(big, 3, size_t{16} << 30)); CK(cudaDeviceSynchronize()); }
    printf("after allocating%s: %.1f us\n", slow ? " and writing 16 GiB" : " nothing", batch());
    const auto t0 = std::chrono::steady_clock::now();
    if (slow) CK(cudaFree(big));
    printf("free took %.2f ms\n", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (double next = 0;;) {
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (t > 3000) break;
      const double us = batch();
      if (t >= next) { printf("t=%7.1f ms  flat %.1f us\n", t, us); next = t < 100 ? t + 10 : t < 1000 ? t + 50 : t + 250; }
    }
    CK(cudaGetLastError());
    return 0;
  }
  if (slow) {  // the prepare benchmark's page pool, allocated, written, freed
    void* big; CK(cudaMalloc(&big, size_t{16} << 30)); CK(cudaMemset(big, 3, size_t{16} << 30));
    CK(cudaDeviceSynchronize()); CK(cudaFree(big));
    printf("(after 16 GiB allocated, written, freed)\n");
  }
  auto time = [&](auto&& launch) {
    for (int k = 0; k < 4; ++k) launch();
    cudaDeviceSynchronize();
    std::vector<float> ms;
    for (int r = 0; r < 9; ++r) {
      cudaEventRecord(e0); for (int k = 0; k < 20; ++k) launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float m; cudaEventElapsedTime(&m, e0, e1); ms.push_back(m / 20);
    }
    std::sort(ms.begin(), ms.end()); return ms[4] * 1e3;
  };
  const double mib = double(kRows) * kVisible * 256 / (1 << 20);
  auto report = [&](const char* name, double us) { printf("%-58s %7.1f us  %5.0f GB/s\n", name, us, mib * (1 << 20) / (us * 1e-6) / 1e9); };
  report("flat, 264 blocks x 256", time(flat_launch));
#define S4(TB, ST, AH, PR, H, NAME) report(NAME, time([&] { scorer_like<TB, ST, AH, H><<<dim3(kRows, PR), 256>>>((flip ^= 1) ? a : b, table, scores, out); }));
  if (short_list) {
    S4(1, 0, 1, 4, 0, "scorer-like, no stores")
    S4(1, 1, 1, 4, 0, "scorer-like, plain stores")
    S4(1, 1, 1, 4, 2, "scorer-like, stores L2 evict_last")
    S4(1, 1, 1, 4, 4, "scorer-like, stores .cs")
  } else {
    report("flat, (64, 4) blocks x 256", time([&] { flat<<<dim3(64, 4), 256>>>((flip ^= 1) ? a : b, kRows * kVisible / 32, out); }));
    S4(0, 0, 0, 4, 0, "scorer grid (64,4), contiguous rows")
    S4(1, 0, 0, 4, 0, "scorer grid, shuffled pages, table load per tile")
    S4(1, 0, 1, 4, 0, "scorer grid, shuffled pages, table load one tile ahead")
    S4(1, 1, 1, 4, 0, "... + score stores")
    S4(0, 1, 0, 4, 0, "contiguous rows + score stores")
    S4(1, 1, 1, 8, 0, "shuffled, ahead, stores, grid (64, 8)")
    S4(1, 1, 1, 4, 1, "stores; key loads L2 evict_first")
    S4(1, 1, 1, 4, 2, "stores L2 evict_last")
    S4(1, 1, 1, 4, 3, "stores L2 evict_last; key loads evict_first")
    S4(1, 1, 1, 4, 4, "stores .cs")
    S4(1, 0, 1, 4, 1, "no stores; key loads evict_first")
  }
  CK(cudaGetLastError());
  return 0;
}
