// Twenty-ninth pass (docs/performance.md), H200: how fast one SM gathers its share of a decode
// row's K and V rows when fewer, fuller blocks take the row. The spread kernel spreads 2051 ids
// of each of 2 KV groups over 65 blocks (32 ids each) and merges the 65 partials through a
// grid-wide barrier (0.9 us) and L2 loads (0.5-0.9 us). A cluster of 16 blocks per group could
// merge through distributed shared memory instead, but then each block gathers 129 ids: this
// probe says what that gather costs, and what the cluster's merge would.
//
// Each launch: blocks of 128 threads, one per SM (shared memory), `per` blocks per group, 2
// groups. A block loads its ids (from a rotated id set), then copies its K and V rows (512 bytes
// each: head dim 256 in bf16, rows 1 KB apart as in the cache [token, group, dim]) into shared
// memory with cp.async (mode 0) or one bulk copy per row (mode 1), and waits for them. With
// clusters of 16 it then meets its cluster, reads a 12 KB share of the others' shared memory (the
// merge's loads), and meets it again. Stamps (%globaltimer) per block; per launch the spread of
// the blocks. The K and V buffers rotate over 64 copies of a 32K-token cache (4 GiB), so every
// launch reads from DRAM. Not part of the build; on the H200:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o gather_probe gather-probe.cu && ./gather_probe
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>
namespace cg = cooperative_groups;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kTokens = 32768, kIds = 2051, kGroups = 2, kRowBytes = 512, kCopies = 64;
constexpr int kThreads = 128, kPts = 8, kLaunches = 256;

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ inline uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

struct Args {
  const int32_t* ids;     // [kCopies][kIds]
  const unsigned char* k;  // [kCopies][kTokens][kGroups][kRowBytes]
  const unsigned char* v;
  unsigned long long* stamps;  // [launch][block][kPts]
  int per, rows, mode, cluster, launch;
};

__global__ void gather(Args a) {
  // Dynamic shared memory only (static next to the opted-in maximum fails the launch):
  // [the K rows][the V rows][512 ids][the bulk copies' mbarrier].
  extern __shared__ __align__(128) unsigned char sm[];
  int32_t* ids_s = reinterpret_cast<int32_t*>(sm + 2 * a.rows * kRowBytes);
  unsigned long long& bar = *reinterpret_cast<unsigned long long*>(ids_s + 512);
  const int g = blockIdx.x / a.per, j = blockIdx.x % a.per, tid = threadIdx.x;
  const int c = a.launch % kCopies;
  unsigned long long* st = a.stamps + (static_cast<size_t>(a.launch) * gridDim.x + blockIdx.x) * kPts;
  if (tid == 0) st[0] = now_ns();
  const int begin = j * a.rows, n = max(0, min(a.rows, kIds - begin));
  for (int i = tid; i < n; i += kThreads) ids_s[i] = a.ids[c * kIds + begin + i];
  __syncthreads();
  if (tid == 0) st[1] = now_ns();
  const size_t base = static_cast<size_t>(c) * kTokens * kGroups * kRowBytes + g * kRowBytes;
  unsigned char* k_s = sm;
  unsigned char* v_s = sm + a.rows * kRowBytes;
  if (a.mode == 0) {
    for (int i = tid; i < n * (kRowBytes / 16); i += kThreads) {
      const int r = i / (kRowBytes / 16), p = i % (kRowBytes / 16);
      const size_t off = base + static_cast<size_t>(ids_s[r]) * kGroups * kRowBytes + p * 16;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(k_s + r * kRowBytes + p * 16)),
                   "l"(a.k + off));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(v_s + r * kRowBytes + p * 16)),
                   "l"(a.v + off));
    }
    asm volatile("cp.async.commit_group;");
    if (tid == 0) st[2] = now_ns();
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
  } else {
    const uint32_t b = smem_u32(&bar);
    if (tid == 0) {
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(b));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (tid == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(b), "r"(2 * n * kRowBytes) : "memory");
    __syncthreads();
    for (int r = tid; r < n; r += kThreads) {
      const size_t off = base + static_cast<size_t>(ids_s[r]) * kGroups * kRowBytes;
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              smem_u32(k_s + r * kRowBytes)),
          "l"(a.k + off), "r"(kRowBytes), "r"(b)
          : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              smem_u32(v_s + r * kRowBytes)),
          "l"(a.v + off), "r"(kRowBytes), "r"(b)
          : "memory");
    }
    if (tid == 0) st[2] = now_ns();
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(b)
          : "memory");
    __syncthreads();
  }
  if (tid == 0) st[3] = now_ns();
  if (a.cluster > 1) {
    cg::cluster_group cl = cg::this_cluster();
    cl.sync();
    if (tid == 0) st[4] = now_ns();
    // The merge's loads: 768 float4 quads per group (12 heads x 256 dims / 4), a block's share
    // 768 / 16 = 48, each from all 16 ranks' partials: 768 loads of 16 bytes per block.
    float4 acc = make_float4(0, 0, 0, 0);
    for (int i = tid; i < 48 * a.cluster; i += kThreads) {
      const int rank = i % a.cluster, q = i / a.cluster;
      const float4* remote = cl.map_shared_rank(reinterpret_cast<const float4*>(sm), rank);
      const float4 x = remote[j % a.cluster * 48 + q];
      acc.x += x.x;
      acc.y += x.y;
    }
    __syncthreads();
    if (tid == 0) st[5] = now_ns();
    if (acc.x == 1234.5f) st[7] = 1;
    cl.sync();
    if (tid == 0) st[6] = now_ns();
  }
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t kv_bytes = static_cast<size_t>(kCopies) * kTokens * kGroups * kRowBytes;
  unsigned char *k, *v;
  int32_t* ids;
  unsigned long long* stamps;
  CK(cudaMalloc(&k, kv_bytes));
  CK(cudaMalloc(&v, kv_bytes));
  CK(cudaMemset(k, 0x3c, kv_bytes));
  CK(cudaMemset(v, 0x3c, kv_bytes));
  std::mt19937 rng(20261203);  // seed printed in the JSON
  std::vector<int32_t> h_ids(static_cast<size_t>(kCopies) * kIds);
  std::vector<int32_t> perm(kTokens);
  for (int c = 0; c < kCopies; ++c) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::sort(perm.begin(), perm.begin() + kIds);
    std::copy(perm.begin(), perm.begin() + kIds, h_ids.begin() + static_cast<size_t>(c) * kIds);
  }
  CK(cudaMalloc(&ids, h_ids.size() * 4));
  CK(cudaMemcpy(ids, h_ids.data(), h_ids.size() * 4, cudaMemcpyHostToDevice));
  const size_t stamp_words = static_cast<size_t>(kLaunches) * 256 * kPts;
  CK(cudaMalloc(&stamps, stamp_words * 8));
  CK(cudaFuncSetAttribute(gather, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(gather, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(prop.sharedMemPerBlockOptin)));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("{\"gpu\": \"%s\", \"sms\": %d, \"seed\": 20261203, \"ids\": %d, \"configs\": [\n", prop.name,
         prop.multiProcessorCount, kIds);
  struct Cfg {
    int per, mode, cluster;
  };
  const Cfg cfgs[] = {{65, 0, 1}, {65, 1, 1}, {33, 0, 1}, {33, 1, 1}, {16, 0, 1},
                      {16, 1, 1}, {16, 0, 16}, {16, 1, 16}, {22, 1, 1}};
  bool first = true;
  for (const Cfg& cf : cfgs) {
    const int rows = (kIds + cf.per - 1) / cf.per;
    const size_t smem =
        std::max<size_t>(2 * rows * kRowBytes + 512 * 4 + 16, prop.sharedMemPerMultiprocessor / 2 + 1024);
    if (smem > prop.sharedMemPerBlockOptin) continue;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cf.cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(cf.per * kGroups);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    Args a{ids, k, v, stamps, cf.per, rows, cf.mode, cf.cluster, 0};
    for (int w = 0; w < 2 * kCopies; ++w) {  // warm-up
      a.launch = w % kLaunches;
      CK(cudaLaunchKernelEx(&cfg, gather, a));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(stamps, 0, stamp_words * 8));
    CK(cudaEventRecord(e0));
    for (int l = 0; l < kLaunches; ++l) {
      a.launch = l;
      CK(cudaLaunchKernelEx(&cfg, gather, a));
    }
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<unsigned long long> h(stamp_words);
    CK(cudaMemcpy(h.data(), stamps, stamp_words * 8, cudaMemcpyDeviceToHost));
    // Per launch: the median block's phases (ns after its own start), and the launch's span from
    // the first block's start to the last block's copies landed.
    std::vector<double> ph[6], span;
    for (int l = 8; l < kLaunches; ++l) {
      std::vector<double> p[6];
      unsigned long long lo = ~0ull, hi = 0;
      for (int b = 0; b < cf.per * kGroups; ++b) {
        const unsigned long long* s = h.data() + (static_cast<size_t>(l) * cfg.gridDim.x + b) * kPts;
        lo = std::min(lo, s[0]);
        hi = std::max(hi, s[3]);
        for (int i = 1; i < 7; ++i)
          if (s[i] != 0) p[i - 1].push_back(static_cast<double>(s[i] - s[0]));
      }
      for (int i = 0; i < 6; ++i)
        if (!p[i].empty()) {
          std::nth_element(p[i].begin(), p[i].begin() + p[i].size() / 2, p[i].end());
          ph[i].push_back(p[i][p[i].size() / 2]);
        }
      span.push_back(static_cast<double>(hi - lo));
    }
    auto med = [](std::vector<double> x) {
      if (x.empty()) return -1.0;
      std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
      return x[x.size() / 2] / 1000.0;
    };
    printf("%s  {\"blocks_per_group\": %d, \"ids_per_block\": %d, \"mode\": \"%s\", \"cluster\": %d, "
           "\"period_us\": %.3f, \"ids_loaded_us\": %.3f, \"issued_us\": %.3f, \"landed_us\": %.3f, "
           "\"launch_span_us\": %.3f, \"cluster_sync_us\": %.3f, \"dsmem_loads_us\": %.3f, \"exit_sync_us\": %.3f}",
           first ? "" : ",\n", cf.per, rows, cf.mode ? "bulk" : "cp.async", cf.cluster, ms * 1000.0 / kLaunches,
           med(ph[0]), med(ph[1]), med(ph[2]), med(span), med(ph[3]), med(ph[4]), med(ph[5]));
    first = false;
  }
  printf("\n]}\n");
  return 0;
}
