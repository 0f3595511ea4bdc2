// Fifteenth pass (docs/performance.md), 2026-12-01, H200: how fast a kernel that only reads can
// stream 512 MiB, for the select scorer's floor. Not part of the build; run on the H200 with
//   nvcc -O3 -arch=sm_90a -std=c++17 -o readbw read-probe.cu && ./readbw
// Its output is in h200-2026-12-01-store-probes.json ("read").
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <random>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

template <int U, int MODE>
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (MODE == 0) v[u] = p[i + u * stride];
      else if (MODE == 1) v[u] = __ldg(p + i + u * stride);
      else v[u] = __ldcg(p + i + u * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Tiles of 8 KiB (512 uint4): warp w takes tiles w, w + W, ... ; tile order permuted in pages of 100 KiB.
template <int U>
__global__ void tile_kernel(const uint4* __restrict__ p, const int32_t* __restrict__ tile_of, int tiles, uint32_t* out) {
  uint32_t acc = 0;
  const int lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x / 32);
  const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  for (int t = w; t < tiles; t += warps) {
    const uint4* q = p + size_t(tile_of[t]) * 512;
    uint4 v[16];
#pragma unroll
    for (int u = 0; u < 16; ++u) v[u] = q[u * 32 + lane];
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// The scorer's access pattern: lane (gq, tq) loads 16 B of row gq + 8u at byte 64c + 16tq (c, u < 4).
template <int PAT, int MODE>
__global__ void tile2_kernel(const uint4* __restrict__ p, const int32_t* __restrict__ tile_of, int tiles, uint32_t* out) {
  uint32_t acc = 0;
  const int lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int warps = gridDim.x * (blockDim.x / 32);
  const int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  for (int t = w; t < tiles; t += warps) {
    const uint4* q = p + size_t(tile_of[t]) * 512;
    uint4 v[16];
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const uint4* a = PAT == 0 ? q + (c * 4 + u) * 32 + lane : q + (gq + 8 * u) * 16 + c * 4 + tq;
        v[c * 4 + u] = MODE == 0 ? *a : __ldcg(a);
      }
#pragma unroll
    for (int u = 0; u < 16; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

__global__ void copy_kernel(const uint4* __restrict__ a, uint4* __restrict__ b, size_t n) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) b[i] = a[i];
}

int main() {
  const size_t bytes = size_t{2} << 30;  // 2 GiB per set, two sets rotated
  const size_t n = bytes / 16;
  uint4 *a, *b; uint32_t* out;
  CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes)); CK(cudaMalloc(&out, 4));
  CK(cudaMemset(a, 1, bytes)); CK(cudaMemset(b, 2, bytes));
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  auto time = [&](auto&& launch, int reps) {
    launch(); launch(); cudaDeviceSynchronize();
    std::vector<float> ms;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(e0); for (int k = 0; k < reps; ++k) launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float m; cudaEventElapsedTime(&m, e0, e1); ms.push_back(m / reps);
    }
    std::sort(ms.begin(), ms.end()); return ms[3];
  };
  float ms = time([&] { copy_kernel<<<sms * 8, 256>>>(a, b, n / 2); }, 10);
  printf("copy 1GiB: %.1f us, %.0f GB/s (read+write)\n", ms * 1e3, 2.0 * bytes / 2 / (ms * 1e-3) / 1e9);
  int flip = 0;
#define RD(U, MODE, BPS, T) { ms = time([&] { const uint4* src = (flip ^= 1) ? a : b; read_kernel<U, MODE><<<sms * BPS, T>>>(src, n / 4, out); }, 20); \
    printf("read 512MiB U=%d mode=%d blocks/SM=%d threads=%d: %.1f us, %.0f GB/s\n", U, MODE, BPS, T, ms * 1e3, bytes / 4 / (ms * 1e-3) / 1e9); }
  RD(4, 0, 2, 256) RD(8, 0, 2, 256) RD(8, 1, 2, 256) RD(8, 2, 2, 256) RD(4, 0, 4, 512) RD(8, 0, 4, 256) RD(16, 0, 2, 256) RD(8, 2, 4, 512) RD(4, 2, 8, 256)
  // tiles: 512 MiB = 65536 tiles of 8 KiB; permute in groups of 12.5 tiles ~ pages of 100 KiB: use 12-tile pages
  const int tiles = 65536;
  std::vector<int32_t> tile_of(tiles);
  std::vector<int> pages(tiles / 12 + 1); for (size_t i = 0; i < pages.size(); ++i) pages[i] = int(i);
  std::mt19937 rng(7); std::shuffle(pages.begin(), pages.end(), rng);
  for (int t = 0; t < tiles; ++t) tile_of[t] = std::min(tiles * 3 - 1, pages[t / 12] * 12 + t % 12);
  int32_t* d_tiles; CK(cudaMalloc(&d_tiles, tiles * 4)); CK(cudaMemcpy(d_tiles, tile_of.data(), tiles * 4, cudaMemcpyHostToDevice));
  for (int bps : {2, 3, 4}) {
    ms = time([&] { const uint4* src = (flip ^= 1) ? a : b; tile_kernel<16><<<sms * bps, 256>>>(src, d_tiles, tiles, out); }, 20);
    printf("tiles 8KiB shuffled pages, %d blocks/SM x 256: %.1f us, %.0f GB/s\n", bps, ms * 1e3, 512.0 * (1 << 20) / (ms * 1e-3) / 1e9);
  }
  for (int bps : {2, 4}) {
#define T2(PAT, MODE) { ms = time([&] { const uint4* src = (flip ^= 1) ? a : b; tile2_kernel<PAT, MODE><<<sms * bps, 256>>>(src, d_tiles, tiles, out); }, 20); \
    printf("tile2 pattern=%s mode=%s %d blocks/SM x 256: %.1f us, %.0f GB/s\n", PAT ? "scorer(8 rows x 64B)" : "contiguous", MODE ? "cg" : "default", bps, ms * 1e3, 512.0 * (1 << 20) / (ms * 1e-3) / 1e9); }
    T2(0, 0) T2(1, 0) T2(0, 1) T2(1, 1)
  }
  CK(cudaGetLastError());
  return 0;
}
