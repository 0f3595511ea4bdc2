// Twenty-eighth pass (docs/performance.md), H200: where the spread kernel's exchange of partials
// spends its time. 2 x 66 blocks shaped as the kernel's (128 threads, one per SM) each store a
// 12-head x 256-dim fp32 partial and its (m, l) as the kernel does, meet at the kernel's barrier
// (fence, atomic arrival, acquiring polls), then load their share of all 66 partials as the
// kernel's merge does (8 threads per output quad, 9 splits each, all in flight), add them and
// run the merge's epilogue (sigmoid, division, stores). %globaltimer stamps per block. Modes:
//   0 as the kernel: the loads read the partials stored in this launch, by other SMs
//   1 the same loads from a buffer of the same shape written once, long before (L2-resident)
//   2 the barrier alone (no loads, no epilogue)
//   3 one split per thread instead of nine (the loads' latency without their bytes)
//   4 each block's loads all read its own partial (stored by its own SM in this launch)
//   5 no barrier: each block flips its bit in a mask of arrivals (atomicXor after a fence), and
//     its threads poll the mask (a warp's lane 0, shuffled) and load each split's partial as soon
//     as its bit shows, all nine held in registers and summed in a fixed order once all arrived
//     (the same bits as mode 0 whatever the timing)
// Modes 0 and 5 also run with the blocks' stores staggered over 0.45 us (block j waits
// 7 ns x (37 j mod 66) first), as the kernel's blocks finish their attention, and the time from
// the last block's stores to each block's sums is reported. Then the period of back-to-back launches with programmatic dependent launch (each kernel waits
// for the previous with griddepcontrol.wait): an empty kernel of the same blocks, and modes 2, 0.
// Not part of the build; on the H200:
//   nvcc -O3 -arch=sm_90a -std=c++17 -o exchange_probe exchange-probe.cu && ./exchange_probe
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("ERR %s line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int S = 66, G = 2, NH = 12, D = 256, kThreads = 128, kSplits = 9, kParts = 8, kQuads = 12;
constexpr int kPts = 6, kSeqs = 64;  // stamps: start, stored, barrier, maxima, sums, epilogue
__device__ uint32_t counters[G];
__device__ unsigned long long masks[G][2];  // mode 5: bit j of (j / 64, j % 64) flips when block j arrives

struct Args {
  float* part;     // [G, NH, S, D]
  float* ml;       // [G, NH, S, 2]
  const float* cold;
  const float* cold_ml;
  float* sink;     // [G, NH, D]
  unsigned long long* st;  // [kSeqs][G * S][kPts]
  int mode, seq, stagger;
};

__device__ inline unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ inline unsigned long long load_acquire64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ inline uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__global__ void __launch_bounds__(kThreads, 1) empty_kernel(float* sink) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0 && sink[0] == 12345.0f) sink[1] = 1.0f;
}

__global__ void __launch_bounds__(kThreads, 1) probe(Args a) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  const int j = blockIdx.x, g = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  unsigned long long* st = tid == 0 ? a.st + ((a.seq % kSeqs) * G * S + g * S + j) * kPts : nullptr;
  if (st) st[0] = now();
  if (a.stagger) {
    const unsigned long long until = now() + 7ull * ((37 * j) % S);
    while (now() < until) {
    }
  }
  const float fresh = 1e-3f * static_cast<float>(a.seq % 97 + j);
  for (int jj = 0; jj < 8; ++jj) {
    const int d = (warp + 4 * jj) * 8 + 2 * tq;
    if (gq < NH) *reinterpret_cast<float2*>(a.part + ((g * NH + gq) * S + j) * D + d) = make_float2(fresh, fresh + d);
    if (gq + 8 < NH)
      *reinterpret_cast<float2*>(a.part + ((g * NH + gq + 8) * S + j) * D + d) = make_float2(fresh, -fresh);
  }
  if (warp == 0 && tq == 0) {
    if (gq < NH) *reinterpret_cast<float2*>(a.ml + ((g * NH + gq) * S + j) * 2) = make_float2(fresh, 1.0f + fresh);
    if (gq + 8 < NH) *reinterpret_cast<float2*>(a.ml + ((g * NH + gq + 8) * S + j) * 2) = make_float2(-fresh, 1.0f);
  }
  if (st) st[1] = now();
  __syncthreads();
  __shared__ int phase;
  if (a.mode == 5) {
    if (tid == 0) {
      __threadfence();
      const unsigned long long old = atomicXor(&masks[g][j >> 6], 1ull << (j & 63));
      phase = ((old >> (j & 63)) & 1ull) ? 0 : 1;  // every launch flips every bit once
    }
  } else if (tid == 0) {
    __threadfence();
    const uint32_t old = atomicAdd(counters + g, j == 0 ? 0x80000000u - (S - 1) : 1u);
    while (((old ^ load_acquire(counters + g)) & 0x80000000u) == 0) {
    }
  }
  __syncthreads();
  if (st) st[2] = now();
  if (a.mode == 2) return;
  const int q = tid / kParts, part = tid % kParts;
  const bool live = q < kQuads;
  const int e = (j * kQuads + (live ? q : 0)) * 4;  // 768 quads per group over 64 blocks
  const int head = g * NH + (e / D) % NH;
  const float* src = a.mode == 1 ? a.cold : a.part;
  const float* src_ml = a.mode == 1 ? a.cold_ml : a.ml;
  const int splits = a.mode == 3 ? 1 : kSplits;
  float2 ml[kSplits];
  float4 o[kSplits];
#pragma unroll
  for (int k = 0; k < kSplits; ++k) {
    ml[k] = make_float2(-INFINITY, 0.0f);
    o[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  if (a.mode == 5) {
    const int p = phase;
    uint32_t want = 0, loaded = 0;
#pragma unroll
    for (int k = 0; k < kSplits; ++k)
      if (live && part + k * kParts < S) want |= 1u << k;
    for (int polls = 0; polls < (1 << 22); ++polls) {  // (a wrong phase would hang: give up instead)
      unsigned long long w0 = 0, w1 = 0;
      if (lane == 0) {
        w0 = load_acquire64(&masks[g][0]);
        w1 = load_acquire64(&masks[g][1]);
      }
      w0 = __shfl_sync(0xffffffffu, w0, 0);
      w1 = __shfl_sync(0xffffffffu, w1, 0);
      const unsigned long long a0 = p ? w0 : ~w0, a1 = p ? w1 : ~w1;  // bit s: block s arrived
#pragma unroll
      for (int k = 0; k < kSplits; ++k) {
        const int s = part + k * kParts;
        const bool in = ((s < 64 ? a0 >> s : a1 >> (s - 64)) & 1ull) != 0;
        if ((want >> k & 1u) && !(loaded >> k & 1u) && in) {
          ml[k] = __ldcg(reinterpret_cast<const float2*>(src_ml) + head * S + s);
          o[k] = __ldcg(reinterpret_cast<const float4*>(src) + ((head * S + s) * D + e % D) / 4);
          loaded |= 1u << k;
        }
      }
      if (__all_sync(0xffffffffu, loaded == want)) break;
    }
  } else {
#pragma unroll
    for (int k = 0; k < kSplits; ++k) {
      const int s = a.mode == 4 ? j : part + k * kParts;
      if (live && k < splits && s < S) {
        ml[k] = __ldcg(reinterpret_cast<const float2*>(src_ml) + head * S + s);
        o[k] = __ldcg(reinterpret_cast<const float4*>(src) + ((head * S + s) * D + e % D) / 4);
      }
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kSplits; ++k) m = fmaxf(m, ml[k].x);
  for (int x = 1; x < kParts; x <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
  if (st && __float_as_int(m) != 0x7eadbeef) st[3] = now();
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float l = 0.0f;
#pragma unroll
  for (int k = 0; k < kSplits; ++k) {
    const float w = ml[k].x == -INFINITY ? 0.0f : exp2f((ml[k].x - m) * 1.4426950408889634f);
    l = fmaf(ml[k].y, w, l);
    v.x = fmaf(o[k].x, w, v.x);
    v.y = fmaf(o[k].y, w, v.y);
    v.z = fmaf(o[k].z, w, v.z);
    v.w = fmaf(o[k].w, w, v.w);
  }
  for (int x = 1; x < kParts; x <<= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, x);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, x);
    v.z += __shfl_xor_sync(0xffffffffu, v.z, x);
    v.w += __shfl_xor_sync(0xffffffffu, v.w, x);
    l += __shfl_xor_sync(0xffffffffu, l, x);
  }
  if (st && __float_as_int(v.x + v.y + v.z + v.w + l) != 0x7eadbeef) st[4] = now();
  if (live && part == 0) {
    const float vv[4] = {v.x, v.y, v.z, v.w};
    float out[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float sig = 1.0f / (1.0f + expf(-vv[k] * 0.01f));
      out[k] = (l > 0.0f ? vv[k] / l : 0.0f) * sig;
    }
    *reinterpret_cast<float4*>(a.sink + (head % NH + g * NH) * D + e % D) = make_float4(out[0], out[1], out[2], out[3]);
  }
  if (st) st[5] = now();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t smem = prop.sharedMemPerMultiprocessor / 2 + 1024;  // one block per SM
  CK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const size_t part_n = size_t{G} * NH * S * D, ml_n = size_t{G} * NH * S * 2;
  float *part, *ml, *cold, *cold_ml, *sink;
  unsigned long long* st;
  CK(cudaMalloc(&part, part_n * 4));
  CK(cudaMalloc(&ml, ml_n * 4));
  CK(cudaMalloc(&cold, part_n * 4));
  CK(cudaMalloc(&cold_ml, ml_n * 4));
  CK(cudaMalloc(&sink, size_t{G} * NH * D * 4));
  CK(cudaMalloc(&st, size_t{kSeqs} * G * S * kPts * 8));
  CK(cudaMemset(cold, 0, part_n * 4));
  CK(cudaMemset(cold_ml, 0, ml_n * 4));
  CK(cudaMemset(sink, 0, size_t{G} * NH * D * 4));
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(S, G);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  printf("{\"gpu\": \"%s\", \"sms\": %d, \"blocks\": %d, \"runs\": [\n", prop.name, prop.multiProcessorCount, S * G);
  const char* names[] = {"as the kernel", "cold buffer", "barrier only", "one split per thread", "own partial",
                         "arrival mask, loads as blocks arrive"};
  const int configs[][2] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {0, 1}, {5, 1}};
  std::vector<unsigned long long> h(static_cast<size_t>(kSeqs) * G * S * kPts);
  for (int c = 0; c < 8; ++c) {
    const int mode = configs[c][0], stagger = configs[c][1];
    int seq = 0;
    for (int rep = 0; rep < 200 + kSeqs; ++rep) {
      Args a{part, ml, cold, cold_ml, sink, st, mode, seq++, stagger};
      CK(cudaLaunchKernelEx(&cfg, probe, a));
    }
    CK(cudaStreamSynchronize(stream));
    CK(cudaMemcpy(h.data(), st, h.size() * 8, cudaMemcpyDeviceToHost));
    // Per launch: medians over blocks of each phase, and from the last block's stores.
    std::vector<double> ph[kPts], last_to_first, last_to_sums, last_to_end;
    for (int sq = 0; sq < kSeqs; ++sq) {
      std::vector<double> p[kPts], sums_abs, end_abs;
      double last_store = 0, first_release = 1e30;
      const unsigned long long* b0 = h.data() + static_cast<size_t>(sq) * G * S * kPts;
      const unsigned long long t_base = b0[0];
      for (int b = 0; b < G * S; ++b) {
        const unsigned long long* t = b0 + b * kPts;
        for (int k = 1; k < kPts; ++k) p[k].push_back(t[k] >= t[k - 1] && t[k] ? 1e-3 * (t[k] - t[k - 1]) : 0.0);
        last_store = std::max(last_store, 1e-3 * static_cast<double>(t[1] - t_base));
        first_release = std::min(first_release, 1e-3 * static_cast<double>(t[2] - t_base));
        if (t[4]) sums_abs.push_back(1e-3 * static_cast<double>(t[4] - t_base));
        if (t[5]) end_abs.push_back(1e-3 * static_cast<double>(t[5] - t_base));
      }
      for (int k = 1; k < kPts; ++k) ph[k].push_back(median(p[k]));
      last_to_first.push_back(first_release - last_store);
      last_to_sums.push_back(median(sums_abs) - last_store);
      last_to_end.push_back(median(end_abs) - last_store);
    }
    printf("  {\"mode\": %d, \"stagger\": %d, \"what\": \"%s\", \"us\": {\"stores\": %.3f, "
           "\"stored_to_barrier_passed\": %.3f, \"last_store_to_first_release\": %.3f, \"barrier_to_maxima\": %.3f, "
           "\"maxima_to_sums\": %.3f, \"sums_to_epilogue_done\": %.3f, \"last_store_to_sums\": %.3f, "
           "\"last_store_to_epilogue_done\": %.3f}}%s\n",
           mode, stagger, names[mode], median(ph[1]), median(ph[2]), median(last_to_first), median(ph[3]),
           median(ph[4]), median(ph[5]), median(last_to_sums), median(last_to_end), c < 7 ? "," : "");
  }
  printf("], \"periods_us\": {");
  // Launch periods: 2000 back-to-back launches each, timed by events.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int kinds[][2] = {{-1, 0}, {2, 0}, {0, 0}, {0, 1}, {5, 1}};
  const char* kind_names[] = {"empty", "barrier only", "as the kernel", "as the kernel, staggered",
                              "arrival mask, staggered"};
  for (int kind = 0; kind < 5; ++kind) {
    for (int warm = 0; warm < 2; ++warm) {
      CK(cudaEventRecord(e0, stream));
      for (int i = 0; i < 2000; ++i) {
        if (kinds[kind][0] < 0) {
          CK(cudaLaunchKernelEx(&cfg, empty_kernel, sink));
        } else {
          Args a{part, ml, cold, cold_ml, sink, st, kinds[kind][0], i, kinds[kind][1]};
          CK(cudaLaunchKernelEx(&cfg, probe, a));
        }
      }
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
    }
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("\"%s\": %.3f%s", kind_names[kind], ms * 1e3f / 2000, kind < 4 ? ", " : "");
  }
  printf("}}\n");
  return 0;
}
