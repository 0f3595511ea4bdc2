// Device-side phases of the sparse attention kernel (sparse_attention.hip),
// one function per phase of a 128-id tile. Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"
#include "gpu/common/wave.hpp"

namespace qsa::gpu::attn {

constexpr int kThreads = 128;  // = kSparseAttentionTile: one thread per id when computing logits
constexpr int kTile = kThreads;
constexpr int kVec = 4;        // consecutive dims per thread in the PV phase

struct KernelArgs {
  int heads, kv_heads, head_chunks;  // H, G, blocks per group (ceil((H/G) / MAXH))
  int index_width, page_size, max_pages, num_reqs;
  int splits, ids_per_split;
  int64_t num_pages;
  bool count_column, round_logits, round_p, round_output, round_sigmoid, fnuz;
  float scale, k_scale, v_scale;
  const uint16_t* q;
  const uint16_t* gate;
  const int32_t* token_idx;
  const int32_t* token_slots;  // null, or token_idx's slots (SparseAttentionArgs): the spread kernel's ids
  const int32_t* token_to_req;
  const int32_t* seq_lens;
  const int32_t* block_table;
  const void* k_cache;
  const void* v_cache;
  float* attn;
  uint16_t* gated;
  float* ws_acc;  // [T, H, splits, D]
  float* ws_ml;   // [T, H, splits, 2]: running max, sum
};

// The counted columns of one (row, split), as every decode kernel reads
// them: the count column (when present) bounds the row, clamped to
// [0, width - 1] as the reference does; padding rows and bad requests
// attend nothing (end = begin).
struct SplitColumns {
  const int32_t* ids;  // the row's token ids
  int req;
  int64_t seq_len;
  int begin, end;  // this split's columns
};

__device__ inline SplitColumns split_columns(const KernelArgs& a, int64_t row, int split) {
  SplitColumns c;
  c.ids = a.token_idx + row * a.index_width;
  int n = a.index_width - (a.count_column ? 1 : 0);
  if (a.count_column) n = max(0, min(c.ids[a.index_width - 1], a.index_width - 1));
  c.req = a.token_to_req[row];
  const bool real = c.req >= 0 && c.req < a.num_reqs;
  c.seq_len = real ? a.seq_lens[c.req] : 0;
  c.begin = split * a.ids_per_split;
  c.end = real ? min(n, c.begin + a.ids_per_split) : c.begin;
  return c;
}

// Loads of 8 or 4 consecutive cache values as floats. bf16 pairs sit little
// endian in each 32-bit word (element d in the low half).
template <class KvT>
struct KvRow;

template <>
struct KvRow<uint16_t> {
  __device__ static void unpack(uint32_t w, float& lo, float& hi) {
    lo = bits_float(w << 16);
    hi = bits_float(w & 0xffff0000u);
  }
  __device__ static void load8(const uint16_t* p, float, bool, float* out) {
    const uint4 w = *reinterpret_cast<const uint4*>(p);
    unpack(w.x, out[0], out[1]);
    unpack(w.y, out[2], out[3]);
    unpack(w.z, out[4], out[5]);
    unpack(w.w, out[6], out[7]);
  }
  __device__ static void load4(const uint16_t* p, float, bool, float* out) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    unpack(w.x, out[0], out[1]);
    unpack(w.y, out[2], out[3]);
  }
};

template <>
struct KvRow<uint8_t> {
  __device__ static void unpack(uint32_t w, float scale, bool fnuz, float* out) {
    for (int e = 0; e < 4; ++e) out[e] = fp8_e4m3_to_float(static_cast<uint8_t>(w >> (8 * e)), fnuz) * scale;
  }
  __device__ static void load8(const uint8_t* p, float scale, bool fnuz, float* out) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    unpack(w.x, scale, fnuz, out);
    unpack(w.y, scale, fnuz, out + 4);
  }
  __device__ static void load4(const uint8_t* p, float scale, bool fnuz, float* out) {
    unpack(*reinterpret_cast<const uint32_t*>(p), scale, fnuz, out);
  }
};

// resolve_slot in two halves, for callers that batch their page-table
// loads (all of them issued before any is used): the table column that
// holds id t (-1 when t < 0 or past the table), then t's slot from that
// entry (-1 also for t >= seq_len, an unmapped page or one past the cache).
// The page is passed on so that t's offset in it costs no second division.
__device__ inline int page_of(const KernelArgs& a, int32_t t) {
  const int page = t / a.page_size;
  return t >= 0 && page < a.max_pages ? page : -1;
}

__device__ inline int64_t slot_on_page(const KernelArgs& a, int64_t seq_len, int32_t t, int page, int32_t phys) {
  if (t < 0 || t >= seq_len || page < 0 || phys < 0 || phys >= a.num_pages) return -1;
  return static_cast<int64_t>(phys) * a.page_size + (t - page * a.page_size);
}

// Main-cache slot of request-relative token `t`, or -1 when the id is not
// attended: negative, at or past seq_len, beyond the table or unmapped. The
// page check against num_pages repeats the host validation cheaply.
__device__ inline int64_t resolve_slot(const KernelArgs& a, int req, int64_t seq_len, int32_t t) {
  if (t < 0 || t >= seq_len) return -1;
  const int page = page_of(a, t);
  if (page < 0) return -1;
  return slot_on_page(a, seq_len, t, page, a.block_table[static_cast<int64_t>(req) * a.max_pages + page]);
}

// Phase 1, one thread per id: the logits of all MAXH heads against the id's
// K row, or -inf for an id that is not attended. q_s is zero for heads past
// the chunk's count, so their logits are harmless zeros.
template <int D, int MAXH, class KvT>
__device__ void tile_logits(const KernelArgs& a, int g, int64_t slot, const float (*q_s)[D], float (*s_s)[kTile]) {
  const int tid = static_cast<int>(threadIdx.x);
  if (slot < 0) {
#pragma unroll
    for (int i = 0; i < MAXH; ++i) s_s[i][tid] = -INFINITY;
    return;
  }
  const KvT* krow = static_cast<const KvT*>(a.k_cache) + (slot * a.kv_heads + g) * D;
  float s[MAXH];
#pragma unroll
  for (int i = 0; i < MAXH; ++i) s[i] = 0.0f;
  for (int d = 0; d < D; d += 8) {
    float k[8];
    KvRow<KvT>::load8(krow + d, a.k_scale, a.fnuz, k);
#pragma unroll
    for (int i = 0; i < MAXH; ++i) {
      // All threads read the same q values: shared-memory broadcasts.
      const float4 q0 = *reinterpret_cast<const float4*>(&q_s[i][d]);
      const float4 q1 = *reinterpret_cast<const float4*>(&q_s[i][d + 4]);
      float acc = s[i];
      acc = fmaf(q0.x, k[0], acc);
      acc = fmaf(q0.y, k[1], acc);
      acc = fmaf(q0.z, k[2], acc);
      acc = fmaf(q0.w, k[3], acc);
      acc = fmaf(q1.x, k[4], acc);
      acc = fmaf(q1.y, k[5], acc);
      acc = fmaf(q1.z, k[6], acc);
      acc = fmaf(q1.w, k[7], acc);
      s[i] = acc;
    }
  }
#pragma unroll
  for (int i = 0; i < MAXH; ++i)
    s_s[i][tid] = a.round_logits ? round_bf16(round_bf16(s[i]) * a.scale) : s[i] * a.scale;
}

// Phase 2, one wave per row of s_s (a head here, a (row, head) pair in the
// prefill kernel): folds the tile's kWidth logits into the running max m and
// sum l and turns them into the PV weights in place. alpha_s[i] is the factor
// exp(m_old - m_new) that the PV phase applies to its accumulators first.
// With no attended id yet m stays -inf and weights are 0. kStride (the row
// pitch of s_s, deduced) may exceed kWidth to spread rows over banks.
template <int kStride, int kWidth = kStride>
__device__ void tile_softmax(const KernelArgs& a, int nh, float (*s_s)[kStride], float* m_s, float* l_s,
                             float* alpha_s) {
  const int lane = lane_id();
  for (int i = wave_id(); i < nh; i += waves_per_block()) {
    float mx = -INFINITY;
    for (int j = lane; j < kWidth; j += warpSize) mx = fmaxf(mx, s_s[i][j]);
    mx = wave_max(mx);
    const float m_old = m_s[i];
    const float m_new = fmaxf(m_old, mx);
    float sum = 0.0f;
    for (int j = lane; j < kWidth; j += warpSize) {
      float e = 0.0f;
      if (m_new != -INFINITY) e = expf(s_s[i][j] - m_new);  // exp(-inf) = 0 for ids not attended
      sum += e;
      s_s[i][j] = a.round_p ? round_bf16(e) : e;
    }
    sum = wave_sum(sum);
    wave_barrier();  // every lane has read m_s[i] before lane 0 replaces it
    if (lane == 0) {
      const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
      l_s[i] = l_s[i] * alpha + sum;
      m_s[i] = m_new;
      alpha_s[i] = alpha;
    }
  }
}

// Phase 3: thread (jl, dc) owns dims [dc*4, dc*4 + 4) of every head and the
// ids j = jl (mod JL) of the tile; V rows are read once for all heads.
template <int D, int MAXH, class KvT>
__device__ void tile_pv(const KernelArgs& a, int g, int tile_n, const float (*s_s)[kTile], const int64_t* slot_s,
                        const float* alpha_s, float (&acc)[MAXH][kVec]) {
  constexpr int kDimThreads = D / kVec;
  constexpr int kLanes = kThreads / kDimThreads;
  const int dc = static_cast<int>(threadIdx.x) % kDimThreads;
  const int jl = static_cast<int>(threadIdx.x) / kDimThreads;
#pragma unroll
  for (int i = 0; i < MAXH; ++i)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] *= alpha_s[i];
  const KvT* vbase = static_cast<const KvT*>(a.v_cache);
  for (int j = jl; j < tile_n; j += kLanes) {
    const int64_t slot = slot_s[j];
    if (slot < 0) continue;
    float v[kVec];
    KvRow<KvT>::load4(vbase + (slot * a.kv_heads + g) * D + dc * kVec, a.v_scale, a.fnuz, v);
#pragma unroll
    for (int i = 0; i < MAXH; ++i) {
      const float p = s_s[i][j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(p, v[e], acc[i][e]);
    }
  }
}

// Sums the id lanes' accumulators into lane jl = 0, head by head through a
// [kThreads * kVec] scratch (a fixed order: results do not depend on timing).
template <int D, int MAXH>
__device__ void reduce_lanes(int nh, float (&acc)[MAXH][kVec], float* red_s) {
  constexpr int kDimThreads = D / kVec;
  constexpr int kLanes = kThreads / kDimThreads;
  if (kLanes == 1) return;
  const int dc = static_cast<int>(threadIdx.x) % kDimThreads;
  const int jl = static_cast<int>(threadIdx.x) / kDimThreads;
#pragma unroll
  for (int i = 0; i < MAXH; ++i) {
    if (i >= nh) continue;  // nh is uniform over the block, so the barriers below stay matched
#pragma unroll
    for (int e = 0; e < kVec; ++e) red_s[(jl * kDimThreads + dc) * kVec + e] = acc[i][e];
    __syncthreads();
    if (jl == 0)
      for (int l = 1; l < kLanes; ++l)
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[i][e] += red_s[(l * kDimThreads + dc) * kVec + e];
    __syncthreads();
  }
}

// A row's output o / l after its online softmax; 0 where l = 0, a row that
// attended no valid token (the reference writes zeros for it: attend_row).
__device__ inline float softmax_normalized(float o, float l) { return l > 0.0f ? o / l : 0.0f; }

// Epilogue for element idx of [T, H, D]: A (rounded to bf16 when the
// storage-point knob is on) and the gated output bf16(A * sigmoid(gate)).
// store_gated takes the gate's bits from the caller, which lets a caller
// load a batch of gates before its first store: the compiler cannot move a
// gate load above a store to attn or gated, which might alias it.
// attn_value: what A stores; gated_bits: bf16(A * sigmoid(gate)) from it.
__device__ inline float attn_value(const KernelArgs& a, float value) {
  return a.round_output ? round_bf16(value) : value;
}
// gate_sigmoid: the factor sigmoid(gate) that gated_bits applies (a
// caller may take it early, off its critical path).
__device__ inline float gate_sigmoid(const KernelArgs& a, uint16_t gate_bits) {
  const float sig = 1.0f / (1.0f + expf(-bf16_to_float(gate_bits)));
  return a.round_sigmoid ? round_bf16(sig) : sig;
}
__device__ inline uint16_t gated_bits(const KernelArgs& a, float out, uint16_t gate_bits) {
  return float_to_bf16_bits(out * gate_sigmoid(a, gate_bits));
}
__device__ inline void store_gated(const KernelArgs& a, int64_t idx, float value, uint16_t gate_bits) {
  const float out = attn_value(a, value);
  a.attn[idx] = out;
  a.gated[idx] = gated_bits(a, out, gate_bits);
}

// The same with the gate read here.
__device__ inline void store_output(const KernelArgs& a, int64_t idx, float value) {
  store_gated(a, idx, value, a.gate[idx]);
}

}  // namespace qsa::gpu::attn
