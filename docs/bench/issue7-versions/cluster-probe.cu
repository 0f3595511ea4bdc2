// Twenty-seventh pass (docs/performance.md), H200: what clusters of thread blocks would give the
// one-row spread kernel. For blocks shaped as its own (128 threads, shared memory enough for one
// block per SM): how many clusters of 1-16 blocks the device holds at once, and what a cluster
// barrier and a load from another block's shared memory (distributed shared memory) cost.
// Not part of the build; on the H200:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o cluster_probe cluster-probe.cu && ./cluster_probe
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kIters = 256;

// Each block: kIters cluster barriers timed together, then a chain of kIters dependent loads
// from the next rank's shared memory; thread 0 writes both averages in cycles.
__global__ void probe(uint32_t* out_sync, uint32_t* out_load, unsigned* out_sm) {
  extern __shared__ uint32_t sm[];
  cg::cluster_group cl = cg::this_cluster();
  const unsigned rank = cl.block_rank(), n = cl.num_blocks();
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) sm[i] = (i + 1) % 1024;  // a ring of indices
  cl.sync();
  long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) cl.sync();
  long long t1 = clock64();
  uint32_t* remote = cl.map_shared_rank(sm, (rank + 1) % n);
  uint32_t j = 0;
  long long t2 = 0, t3 = 0;
  if (threadIdx.x == 0) {
    t2 = clock64();
    for (int i = 0; i < kIters; ++i) j = remote[j];
    t3 = clock64();
  }
  cl.sync();  // no block leaves while another reads its shared memory
  if (threadIdx.x == 0) {
    const unsigned b = blockIdx.x;
    out_sync[b] = static_cast<uint32_t>((t1 - t0) / kIters);
    out_load[b] = static_cast<uint32_t>((t3 - t2) / kIters) + (j == 12345678u ? 1u : 0u);
    unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); out_sm[b] = s;
  }
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  const size_t smem = prop.sharedMemPerMultiprocessor / 2 + 1024;  // one block per SM
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int clock_khz = 0; CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  printf("{\"gpu\": \"%s\", \"sms\": %d, \"clock_khz\": %d, \"smem_per_block\": %zu, \"sizes\": [\n", prop.name,
         prop.multiProcessorCount, clock_khz, smem);
  const int sizes[] = {1, 2, 3, 4, 6, 8, 16};
  bool first = true;
  for (int c : sizes) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = c; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr; cfg.numAttrs = 1;
    cfg.gridDim = dim3(c);
    int clusters = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, probe, &cfg);
    if (e != cudaSuccess) { printf("%s{\"cluster\": %d, \"error\": \"%s\"}", first ? "" : ",\n", c, cudaGetErrorString(e)); first = false; cudaGetLastError(); continue; }
    if (clusters == 0) { printf("%s{\"cluster\": %d, \"max_active_clusters\": 0}", first ? "" : ",\n", c); first = false; continue; }
    const int blocks = clusters * c;
    uint32_t *d_sync, *d_load; unsigned* d_sm;
    CK(cudaMalloc(&d_sync, blocks * 4)); CK(cudaMalloc(&d_load, blocks * 4)); CK(cudaMalloc(&d_sm, blocks * 4));
    cfg.gridDim = dim3(blocks);
    float ms = 0;
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int rep = 0; rep < 3; ++rep) {  // the last of three
      CK(cudaEventRecord(a));
      CK(cudaLaunchKernelEx(&cfg, probe, d_sync, d_load, d_sm));
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      CK(cudaGetLastError());
      CK(cudaEventElapsedTime(&ms, a, b));
    }
    std::vector<uint32_t> s(blocks), l(blocks); std::vector<unsigned> sm(blocks);
    CK(cudaMemcpy(s.data(), d_sync, blocks * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(l.data(), d_load, blocks * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sm.data(), d_sm, blocks * 4, cudaMemcpyDeviceToHost));
    std::sort(s.begin(), s.end()); std::sort(l.begin(), l.end()); std::sort(sm.begin(), sm.end());
    const int distinct = static_cast<int>(std::unique(sm.begin(), sm.end()) - sm.begin());
    printf("%s{\"cluster\": %d, \"max_active_clusters\": %d, \"blocks\": %d, \"distinct_sms\": %d, "
           "\"sync_cycles_median\": %u, \"sync_cycles_max\": %u, \"remote_load_cycles_median\": %u, \"remote_load_cycles_max\": %u, \"launch_ms\": %.4f}",
           first ? "" : ",\n", c, clusters, blocks, distinct, s[blocks / 2], s[blocks - 1], l[blocks / 2], l[blocks - 1], ms);
    first = false;
    cudaFree(d_sync); cudaFree(d_load); cudaFree(d_sm);
  }
  printf("\n]}\n");
  return 0;
}
