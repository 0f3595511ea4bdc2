// Device-side building blocks of the prepare kernel (prepare.hip): the
// kernel's arguments, RoPE cos/sin of one frequency pair, and the per-head
// task "Gemma RMSNorm, RoPE, store" that one wave runs on one head row.
// Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"
#include "gpu/common/wave.hpp"
#include "gpu/prepare/prepare_codes.hpp"
#include "gpu/prepare/prepare_params.hpp"

namespace qsa::gpu::prep {

using prepare_detail::Fp8Kind;

constexpr int kThreads = 256;
constexpr int kMaxWaves = kThreads / kMinWaveSize;  // waves of a block on the narrowest device
constexpr int kMaxPairs = kPrepareMaxRopePairs;
constexpr int kMaxDim = kPrepareMaxHeadDim;

struct NormArgs {
  int dim;
  float eps;
  bool round;  // bf16 after the gain
};

// inv_freq is computed on the host with the reference's formula (exactly
// its bits) and copied into shared memory at the kernel's start.
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

// cos and sin of frequency pair j at `position`, as the reference's
// rope_cos_sin: the angle in fp64 or as torch forms it in fp32, cos/sin in
// fp64, then optionally rounded to fp32 and on to bf16 (a cos/sin cache).
__device__ inline void pair_cos_sin(const RopeArgs& r, double inv_freq, int64_t position, double* c, double* s) {
  double angle;
  if (r.exact_angle) {
    angle = static_cast<double>(position) * inv_freq;
  } else {
    angle = static_cast<double>(static_cast<float>(position) * static_cast<float>(inv_freq));
  }
  double cv = cos(angle);
  double sv = sin(angle);
  if (r.cos_sin != 0) {
    const float cf = static_cast<float>(cv), sf = static_cast<float>(sv);
    cv = static_cast<double>(r.cos_sin == 2 ? round_bf16(cf) : cf);
    sv = static_cast<double>(r.cos_sin == 2 ? round_bf16(sf) : sf);
  }
  *c = cv;
  *s = sv;
}

// Fills cos_t / sin_t[j] for pairs j in [first, half) step `stride`;
// pos3 holds the (t, h, w) positions.
__device__ inline void fill_cos_sin(const RopeArgs& r, const double* inv_freq, const int64_t pos3[3], int first,
                                    int stride, double* cos_t, double* sin_t) {
  for (int j = first; j < r.rotary_dim / 2; j += stride)
    pair_cos_sin(r, inv_freq[j], pos3[prepare_detail::mrope_axis_of(j, r.lim1, r.lim2)], &cos_t[j], &sin_t[j]);
}

// One rotated value: `rot` is -x[b] for the first member of a pair and +x[a]
// for the second (rotate_half), in fp64 like the reference.
__device__ inline double rotate_one(const RopeArgs& r, double x, double rot, double c, double s) {
  using prepare_detail::round_bf16_double;
  if (r.per_op) return round_bf16_double(round_bf16_double(x * c) + round_bf16_double(rot * s));
  const double v = x * c + rot * s;
  return r.round_output ? round_bf16_double(v) : v;
}

// Norm + RoPE of one head row of `dim` values by one wave (all its lanes,
// converged). load(i) gives input value i; store(i, v) receives output value
// i in fp64 (already rounded to bf16 where the knobs round). `scratch` is
// the wave's own [dim] floats of shared memory.
//
// Lanes exchange values only through `scratch` between the two
// wave_barrier()s: pass 1 and 2 touch each lane's own elements, pass 3 reads
// the rotation partners; the closing barrier orders pass 3's reads before
// the next task's pass 1 writes.
template <class Load, class Store>
__device__ void norm_rope_head(int dim, const NormArgs& n, const float* w, const RopeArgs& r, const double* cos_t,
                               const double* sin_t, float* scratch, Load load, Store store) {
  const int lane = lane_id();
  float sq = 0.0f;
  for (int i = lane; i < dim; i += warpSize) {
    const float x = load(i);
    scratch[i] = x;
    sq += x * x;
  }
  const float rms = sqrtf(wave_sum(sq) / static_cast<float>(dim) + n.eps);
  for (int i = lane; i < dim; i += warpSize) {
    float y = scratch[i] / rms * (1.0f + w[i]);
    if (n.round) y = round_bf16(y);
    scratch[i] = y;
  }
  wave_barrier();
  const int half = r.rotary_dim / 2;
  for (int i = lane; i < dim; i += warpSize) {
    double v = scratch[i];
    if (i < r.rotary_dim) {
      const bool first = r.neox ? i < half : i % 2 == 0;
      const int pair = r.neox ? (first ? i : i - half) : i / 2;
      const int partner = r.neox ? (first ? i + half : i - half) : (first ? i + 1 : i - 1);
      const double xp = scratch[partner];
      v = rotate_one(r, v, first ? -xp : xp, cos_t[pair], sin_t[pair]);
    }
    store(i, v);
  }
  wave_barrier();
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
