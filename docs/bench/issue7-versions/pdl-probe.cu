// Twenty-ninth pass (docs/performance.md), H200: why the spread kernel's first loads after
// griddepcontrol.wait take 0.6-1.2 us even when L2 holds their lines (its stamps; the gather
// probe's blocks, launched without a wait, load their ids from DRAM in 0.4 us).
//
// A primary kernel (132 blocks) lets its dependent launch at once, spins for 4 us and stores a
// word per block. The dependent (130 blocks; thread 0 of each measures, %globaltimer) loads a
// line of its own before the wait (from DRAM: every launch takes other lines), waits, then loads
// that line again (an L2 hit), a line no one touched (DRAM), the same line once more, and the
// word the primary stored. Each load's value is used before the next stamp. Modes:
//   pdl       the dependent is a programmatic dependent and fits beside the primary's blocks
//   pdl-full  the same with shared memory for one block per SM (the spread kernel's case: its
//             blocks enter only as the primary's leave)
//   plain     a plain launch after the primary (the wait returns at once)
// It also reports the SM clock the dependent ran at (clock64 over %globaltimer).
// Not part of the build; on the H200:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o pdl_probe pdl-probe.cu && ./pdl_probe
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kBlocks = 130, kLaunches = 200, kPts = 10, kLineWords = 32;

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ inline uint32_t load_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void primary(uint32_t* out, unsigned long long spin_ns) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const unsigned long long t0 = now_ns();
  while (now_ns() - t0 < spin_ns) {
  }
  if (threadIdx.x == 0) out[blockIdx.x * kLineWords] = static_cast<uint32_t>(t0);
}

// x: this launch's lines (one per block, touched before the wait), y: lines nobody touched.
__global__ void dependent(const uint32_t* x, const uint32_t* y, const uint32_t* primary_out,
                          unsigned long long* st, uint32_t* sink) {
  if (threadIdx.x != 0) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }
  unsigned long long* s = st + blockIdx.x * kPts;
  const uint32_t* xl = x + blockIdx.x * kLineWords;
  const uint32_t* yl = y + blockIdx.x * kLineWords;
  uint32_t acc = 0;
  const long long c0 = clock64();
  s[0] = now_ns();
  acc += load_cg(xl);
  if (acc == 0xdeadbeefu) sink[0] = acc;  // the value, before the stamp
  s[1] = now_ns();
  asm volatile("griddepcontrol.wait;" ::: "memory");
  s[2] = now_ns();
  acc += load_cg(xl);
  if (acc == 0xdeadbeefu) sink[1] = acc;
  s[3] = now_ns();
  acc += load_cg(yl);
  if (acc == 0xdeadbeefu) sink[2] = acc;
  s[4] = now_ns();
  acc += load_cg(xl + 1);
  if (acc == 0xdeadbeefu) sink[3] = acc;
  s[5] = now_ns();
  acc += load_cg(primary_out + blockIdx.x * kLineWords);
  if (acc == 0xdeadbeefu) sink[4] = acc;
  s[6] = now_ns();
  const long long c1 = clock64();
  s[7] = static_cast<unsigned long long>(c1 - c0);
  if (acc == 0xdeadbeefu) sink[5] = acc;
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  // Lines for every launch: x and y each kLaunches x kBlocks lines of 128 bytes, 4 KB apart so
  // that no two blocks share a page's first line (about 100 MB each, beyond L2 over a rotation).
  const size_t stride = 1024;  // words: 4 KB
  const size_t words = static_cast<size_t>(kLaunches + 1) * kBlocks * stride;
  uint32_t *x, *y, *pout, *sink;
  unsigned long long* st;
  CK(cudaMalloc(&x, words * 4));
  CK(cudaMalloc(&y, words * 4));
  CK(cudaMemset(x, 1, words * 4));
  CK(cudaMemset(y, 1, words * 4));
  CK(cudaMalloc(&pout, 132 * kLineWords * 4));
  CK(cudaMalloc(&sink, 64));
  CK(cudaMalloc(&st, static_cast<size_t>(kLaunches) * kBlocks * kPts * 8));
  const size_t full = prop.sharedMemPerMultiprocessor / 2 + 1024;
  CK(cudaFuncSetAttribute(dependent, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(full)));
  const char* names[] = {"pdl", "pdl-full", "plain"};
  printf("{\"gpu\": \"%s\", \"modes\": [\n", prop.name);
  for (int mode = 0; mode < 3; ++mode) {
    std::vector<double> ph[6], mhz;
    CK(cudaMemset(st, 0, static_cast<size_t>(kLaunches) * kBlocks * kPts * 8));
    CK(cudaDeviceSynchronize());
    for (int l = 0; l < kLaunches; ++l) {
      primary<<<132, 128>>>(pout, 4000);
      CK(cudaGetLastError());
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kBlocks);
      cfg.blockDim = dim3(128);
      cfg.dynamicSmemBytes = mode == 1 ? full : 0;
      cfg.attrs = attr;
      cfg.numAttrs = mode == 2 ? 0 : 1;
      // Launch l reads lines of set l + 1 (x) and set kLaunches - l (y): never read before.
      const uint32_t* xl = x + static_cast<size_t>(l + 1) * kBlocks * stride;
      const uint32_t* yl = y + static_cast<size_t>(kLaunches - l) * kBlocks * stride;
      CK(cudaLaunchKernelEx(&cfg, dependent, xl, yl, static_cast<const uint32_t*>(pout),
                            st + static_cast<size_t>(l) * kBlocks * kPts, sink));
    }
    CK(cudaDeviceSynchronize());
    std::vector<unsigned long long> h(static_cast<size_t>(kLaunches) * kBlocks * kPts);
    CK(cudaMemcpy(h.data(), st, h.size() * 8, cudaMemcpyDeviceToHost));
    for (int l = 10; l < kLaunches; ++l)
      for (int b = 0; b < kBlocks; ++b) {
        const unsigned long long* s = h.data() + (static_cast<size_t>(l) * kBlocks + b) * kPts;
        for (int i = 0; i < 6; ++i) ph[i].push_back(static_cast<double>(s[i + 1] - s[i]));
        mhz.push_back(static_cast<double>(s[7]) * 1000.0 / static_cast<double>(s[6] - s[0]));
      }
    auto med = [](std::vector<double> v) {
      std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
      return v[v.size() / 2];
    };
    printf("%s  {\"mode\": \"%s\", \"load_before_wait_ns\": %.0f, \"wait_ns\": %.0f, \"l2_hit_after_wait_ns\": %.0f, "
           "\"dram_after_wait_ns\": %.0f, \"l2_hit_later_ns\": %.0f, \"primary_word_ns\": %.0f, \"sm_mhz\": %.0f}",
           mode ? ",\n" : "", names[mode], med(ph[0]), med(ph[1]), med(ph[2]), med(ph[3]), med(ph[4]), med(ph[5]),
           med(mhz));
  }
  printf("\n]}\n");
  return 0;
}
