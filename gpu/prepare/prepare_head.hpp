// Device-side building blocks of the prepare kernel (prepare.hip): the
// kernel's arguments, RoPE cos/sin of one frequency pair, and the per-head
// pieces "load, Gemma RMSNorm, RoPE, store" that one lane group runs on one
// head row. Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"
#include "gpu/common/wave.hpp"
#include "gpu/prepare/prepare_codes.hpp"
#include "gpu/prepare/prepare_params.hpp"

namespace qsa::gpu::prep {

using prepare_detail::Fp8Kind;

// A head task runs on a group of kGroup lanes: an aligned slice of one wave
// (every supported wave is a whole number of kMinWaveSize lanes), so the
// xor shuffles of group_sum (offsets < kGroup) never leave the group, and
// lane l holds elements l, l + kGroup, ... of its head row on 32- and
// 64-wide waves alike, in N registers ("slots"). The kernel is compiled for
// N = 4, 8 and 16 and launched with the smallest N that holds the params'
// head dims: registers are allocated for the worst path, and N = 16 for
// every launch would cost the model's dims (N = 8) a third of the resident
// blocks.
constexpr int kThreads = 256;
constexpr int kGroup = kMinWaveSize;
constexpr int kGroups = kThreads / kGroup;  // head tasks per block
constexpr int kMaxPairs = kPrepareMaxRopePairs;
constexpr int kMaxDim = kPrepareMaxHeadDim;
constexpr int kRotSlots = 2 * kMaxPairs / kGroup;  // the slots that can hold rotary dims
static_assert(kMaxDim % kGroup == 0 && 2 * kMaxPairs % kGroup == 0 && kThreads % kGroup == 0, "whole slots");

struct NormArgs {
  int dim;
  float eps;
  bool round;  // bf16 after the gain
};

// inv_freq is computed on the host with the reference's formula (exactly
// its bits) and read from the kernel arguments (inv_freq_of).
struct RopeArgs {
  int rotary_dim;
  int lim1, lim2;  // 3 * mrope_section[1], 3 * mrope_section[2]
  bool neox;
  bool exact_angle;  // fp64 angle; else f32(f32(pos) * inv_freq)
  int cos_sin;       // 0 fp64, 1 fp32, 2 bf16 (after fp32)
  bool per_op;       // hf-eager: round(round(x cos) + round(rot sin))
  bool round_output;
  double inv_freq[kMaxPairs];
};

struct KernelArgs {
  int64_t num_tokens;  // T
  int num_reqs;        // R
  int hi, di, h, g, d; // H_I, d_I, H, G, D
  int row_parts;       // blocks per row: ceil((H_I + H + G + 1) / kGroups)
  int ratio, ring_capacity;
  int64_t ring_slots, comp_rows, kv_slots;
  NormArgs norm_iq, norm_ik, norm_q, norm_k;
  RopeArgs rope_i, rope_m;
  bool round_pool;  // bf16 pooled means
  bool index_fp8;
  Fp8Kind index_kind;
  bool kv_fp8;
  Fp8Kind kv_kind;
  double k_scale, v_scale;
  const float* index_qk;
  const float* qg;
  const float* k;
  const float* v;
  const float* w_iq;
  const float* w_ik;
  const float* w_q;
  const float* w_k;
  const int32_t* token_to_req;
  const int64_t* pos;
  const int64_t* rope_pos;
  const int64_t* main_slot;
  const int64_t* ring_slot;
  const int64_t* compressed_slot;
  const int32_t* starts;
  const int32_t* ring_blocks;
  float* ring_keys;
  int64_t* ring_rope;
  void* compressed;
  void* k_cache;
  void* v_cache;
  void* index_q;
  uint16_t* q;
  uint16_t* k_out;
  uint16_t* gate;
};

__device__ inline int group_lane() { return static_cast<int>(threadIdx.x) % kGroup; }
__device__ inline int group_id() { return static_cast<int>(threadIdx.x) / kGroup; }

// Butterfly sum over the lane group; with kGroup == warpSize (NVIDIA) the
// order is wave_sum's.
__device__ inline float group_sum(float v) {
  for (int offset = kGroup / 2; offset > 0; offset /= 2) v += wave_shfl_xor(v, offset);
  return v;
}

// inv_freq[j] with compile-time indices only: a dynamic index into the
// kernel arguments would make the compiler copy them to local memory.
__device__ inline double inv_freq_of(const RopeArgs& r, int j) {
  double v = 0.0;
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k)
    if (k == j) v = r.inv_freq[k];
  return v;
}

// cos (which = 0) or sin (which = 1) of frequency pair j at (t, h, w)
// positions pos3, as the reference's rope_cos_sin: the angle in fp64 or as
// torch forms it in fp32, cos/sin in fp64, then optionally rounded to fp32
// and on to bf16 (a cos/sin cache). cos and sin of a pair are independent
// values, so two threads may compute them.
__device__ inline double pair_trig(const RopeArgs& r, int j, int which, const int64_t pos3[3]) {
  const int axis = prepare_detail::mrope_axis_of(j, r.lim1, r.lim2);
  const int64_t position = axis == 0 ? pos3[0] : axis == 1 ? pos3[1] : pos3[2];  // no dynamic index: registers
  const double inv_freq = inv_freq_of(r, j);
  double angle;
  if (r.exact_angle) {
    angle = static_cast<double>(position) * inv_freq;
  } else {
    angle = static_cast<double>(static_cast<float>(position) * static_cast<float>(inv_freq));
  }
  const double v = which == 0 ? cos(angle) : sin(angle);
  if (r.cos_sin == 0) return v;
  const float f = static_cast<float>(v);
  return static_cast<double>(r.cos_sin == 2 ? round_bf16(f) : f);
}

// Fills cos_t[0, half) and sin_t[0, half) at pos3 with a team of `team`
// threads, this one of rank `rank`: one trig value per thread and pass.
__device__ inline void fill_cos_sin(const RopeArgs& r, const int64_t pos3[3], int rank, int team, double* cos_t,
                                    double* sin_t) {
  const int half = r.rotary_dim / 2;
  for (int e = rank; e < 2 * half; e += team) {
    const int which = e < half ? 0 : 1;
    const int j = e - which * half;
    (which == 0 ? cos_t : sin_t)[j] = pair_trig(r, j, which, pos3);
  }
}

// One rotated value: `rot` is -x[b] for the first member of a pair and +x[a]
// for the second (rotate_half), in fp64 like the reference.
__device__ inline double rotate_one(const RopeArgs& r, double x, double rot, double c, double s) {
  using prepare_detail::round_bf16_double;
  if (r.per_op) return round_bf16_double(round_bf16_double(x * c) + round_bf16_double(rot * s));
  const double v = x * c + rot * s;
  return r.round_output ? round_bf16_double(v) : v;
}

// A lane's elements of one head row: element lane + k·kGroup in slot k.
template <int N>
struct Lanes {
  float v[N];
};

// Loads the lane's elements of src[0, dim): every load is issued before any
// is used, so a head row costs one memory latency, not one per element.
template <int N>
__device__ void load_lanes(const float* src, int dim, Lanes<N>& out) {
  const int lane = group_lane();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int i = lane + k * kGroup;
    out.v[k] = i < dim ? src[i] : 0.0f;
  }
}

// Gemma RMSNorm of x (the group's head row) in place, weights w, in fp32 as
// engines do: the sum of squares over the lane's elements in slot order,
// then the butterfly (on NVIDIA the order the one-wave-per-head kernel had),
// sqrtf, x / rms * (1 + w), optional bf16. The rotary dims also go to
// `scratch` (the group's own [2 · kMaxPairs] floats of shared memory), where
// the partners of a pair meet after the next barrier.
template <int N>
__device__ void norm_lanes(int dim, const NormArgs& n, const Lanes<N>& w, int rotary_dim, Lanes<N>& x, float* scratch) {
  const int lane = group_lane();
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < N; ++k)
    if (lane + k * kGroup < dim) sq += x.v[k] * x.v[k];
  const float rms = sqrtf(group_sum(sq) / static_cast<float>(dim) + n.eps);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int i = lane + k * kGroup;
    if (i >= dim) continue;
    float y = x.v[k] / rms * (1.0f + w.v[k]);
    if (n.round) y = round_bf16(y);
    x.v[k] = y;
    if (i < rotary_dim) scratch[i] = y;
  }
}

// RoPE of the normed row y (scratch holds its rotary dims, visible to the
// whole group), then store(i, v) of every element in fp64 (already rounded
// to bf16 where the knobs round).
template <int N, class Store>
__device__ void rope_store_lanes(int dim, const RopeArgs& r, const double* cos_t, const double* sin_t,
                                 const float* scratch, const Lanes<N>& y, Store store) {
  const int lane = group_lane();
  const int half = r.rotary_dim / 2;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int i = lane + k * kGroup;
    if (i >= dim) continue;
    double v = y.v[k];  // exact: for slots from kRotSlots on, the compiler can fold the store's fp64 steps
    if (k < kRotSlots && i < r.rotary_dim) {
      const bool first = r.neox ? i < half : i % 2 == 0;
      const int pair = r.neox ? (first ? i : i - half) : i / 2;
      const int partner = r.neox ? (first ? i + half : i - half) : (first ? i + 1 : i - 1);
      const double xp = scratch[partner];
      v = rotate_one(r, v, first ? -xp : xp, cos_t[pair], sin_t[pair]);
    }
    store(i, v);
  }
}

// Pooling of r member rows (member(m) gives row m) of `dim` values: the
// sums run in fp64 and in member order, as the reference pools. The r · dim
// member values, flattened in (member, element) order, travel through `buf`
// (kMaxDim floats of shared memory) in batches of P · nthreads: every thread
// of the team loads P of them, all issued before any is used, so a batch
// costs one memory round trip whatever r and dim are.
template <int P, class Member>
__device__ void gather_members(int64_t base, int64_t total, int dim, int tid, int nthreads, Member member,
                               float* buf) {
  float v[P];
  int64_t f = base + tid;
  int m = static_cast<int>(f / dim), i = static_cast<int>(f - int64_t{m} * dim);
#pragma unroll
  for (int k = 0; k < P; ++k) {
    v[k] = f < total ? member(m)[i] : 0.0f;
    f += nthreads;
    for (i += nthreads; i >= dim; i -= dim) ++m;
  }
#pragma unroll
  for (int k = 0; k < P; ++k) buf[tid + k * nthreads] = v[k];
}

// Adds batch [base, base + batch) of the flattened members in `buf` to the
// sums of the lane group's elements (sums[i], fp64 in shared memory: one
// register live, not one per element; each lane touches only its own
// elements), in member order.
__device__ inline void sum_members(int64_t base, int batch, int r, int dim, const float* buf, double* sums) {
  const int64_t m_end = (base + batch + dim - 1) / dim;
  const int m_hi = m_end < r ? static_cast<int>(m_end) : r;
  const int m_lo = static_cast<int>(base / dim);
  for (int i = group_lane(); i < dim; i += kGroup) {
    double s = base == 0 ? 0.0 : sums[i];  // a batch holds >= dim values: member 0 of every element is in batch 0
    for (int m = m_lo; m < m_hi; ++m) {
      const int64_t at = int64_t{m} * dim + i - base;
      if (at >= 0 && at < batch) s += static_cast<double>(buf[at]);
    }
    sums[i] = s;
  }
}

// The means of the sums (bf16 with round_pool), as the reference stores them.
template <int N>
__device__ void pooled_means(int dim, int r, bool round_pool, const double* sums, Lanes<N>& x) {
  const int lane = group_lane();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int i = lane + k * kGroup;
    const double mean = i < dim ? sums[i] / r : 0.0;
    x.v[k] = static_cast<float>(round_pool ? prepare_detail::round_bf16_double(mean) : mean);
  }
}

// The indexer-dtype store (quantize_indexer): fp8 without scale, or bf16.
__device__ inline void store_indexer(const KernelArgs& a, void* base, int64_t i, double v) {
  if (a.index_fp8) {
    static_cast<uint8_t*>(base)[i] = prepare_detail::fp8_encode_double(v, a.index_kind);
  } else {
    static_cast<uint16_t*>(base)[i] = prepare_detail::bf16_bits_from_double(v);
  }
}

// The main KV cache store: bf16, or fp8 of x / scale.
__device__ inline void store_kv(const KernelArgs& a, void* base, int64_t i, double v, double scale) {
  if (a.kv_fp8) {
    static_cast<uint8_t*>(base)[i] = prepare_detail::fp8_encode_double(v / scale, a.kv_kind);
  } else {
    static_cast<uint16_t*>(base)[i] = prepare_detail::bf16_bits_from_double(v);
  }
}

}  // namespace qsa::gpu::prep
