// Random-gather bandwidth (issue 7, sixth pass, docs/performance.md): how fast
// the GPU reads S-byte chunks at random S-aligned places of a 16 GiB buffer,
// for S from 64 to 4096 bytes (the KV cache rows' sizes are 256 bytes at fp8
// and 512 at bf16 for one KV head of 256 dims). 1056 blocks of 256 threads,
// 16-byte L2-only loads, 4 chunks in flight per warp, about 2 GiB read per
// size; best of 5 runs by CUDA events. A measurement kept with its results,
// not part of the build:
//   nvcc -O3 -arch=sm_90a random-gather.cu -o random-gather && ./random-gather
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
__device__ __forceinline__ uint32_t hash(uint32_t x) { x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16; return x; }
template <int S>
__global__ void gather(const uint4* __restrict__ buf, uint64_t nchunks, int iters, uint32_t seed, uint4* out) {
  constexpr int kLanesPerChunk = S / 16 < 32 ? S / 16 : 32;
  constexpr int kChunksPerWarp = 32 / kLanesPerChunk;
  constexpr int kPer = S / 16 / kLanesPerChunk;  // 16-byte loads per lane per chunk
  const int lane = threadIdx.x & 31;
  const uint32_t gw = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int it = 0; it < iters; it += 4) {
    uint4 v[4][kPer];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const uint32_t r = hash(seed ^ hash(gw * 1315423911u + (it + u) * kChunksPerWarp + lane / kLanesPerChunk));
      const uint64_t chunk = r % nchunks;
      const uint4* p = buf + chunk * (S / 16) + (lane % kLanesPerChunk);
#pragma unroll
      for (int k = 0; k < kPer; ++k) v[u][k] = __ldcg(p + k * kLanesPerChunk);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int k = 0; k < kPer; ++k) { acc.x ^= v[u][k].x; acc.y ^= v[u][k].y; acc.z ^= v[u][k].z; acc.w ^= v[u][k].w; }
  }
  if (acc.x == 0x12345678u) out[0] = acc;
}
template <int S>
int run(const uint4* buf, uint64_t bytes, uint4* out) {
  const uint64_t nchunks = bytes / S;
  const int blocks = 132 * 8, threads = 256;
  const uint64_t warps = uint64_t(blocks) * threads / 32;
  const int chunks_per_warp_iter = 32 / (S / 16 < 32 ? S / 16 : 32);
  // read ~2 GB
  int iters = int((2ull << 30) / (warps * chunks_per_warp_iter * S));
  iters = (iters + 3) / 4 * 4;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  gather<S><<<blocks, threads>>>(buf, nchunks, 4, 1, out);
  float best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    gather<S><<<blocks, threads>>>(buf, nchunks, iters, 7 + rep, out);
    cudaEventRecord(b); CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b); if (ms < best) best = ms;
  }
  const double total = double(warps) * iters * chunks_per_warp_iter * S;
  printf("chunk %5d B: %.0f GB/s (%.2f GB in %.3f ms)\n", S, total / best / 1e6, total / 1e9, best);
  return 0;
}
int main() {
  const uint64_t bytes = 16ull << 30;
  uint4 *buf, *out;
  CK(cudaMalloc(&buf, bytes)); CK(cudaMalloc(&out, 64));
  CK(cudaMemset(buf, 1, bytes));
  run<64>(buf, bytes, out); run<128>(buf, bytes, out); run<256>(buf, bytes, out); run<512>(buf, bytes, out);
  run<1024>(buf, bytes, out); run<2048>(buf, bytes, out); run<4096>(buf, bytes, out);
  return 0;
}
