// The tasks of the prepare kernel (prepare.hip says how they are laid out
// and why they cannot race), one body per kind: a head task (indexer Q, main
// Q with its gate copy, K with its V copy and the KV cache writes), the
// pooling of a completed group and a request's ring writes. The kernel
// dispatches once per lane group, so each body is straight-line code for its
// kind: its rows, dims, RoPE and destinations are known where it is
// compiled, and no other kind's address arithmetic or store runs beside it
// (a run-time kind cost a head task half of its instructions in branches,
// selects and the index arithmetic of every kind). Include only from
// prepare.hip.
#pragma once

#include <cstdint>

#include "gpu/prepare/prepare_head.hpp"

namespace qsa::gpu::prep {

enum class Kind { kIndexQ, kQ, kK };

__device__ inline const float* raw_key(const KernelArgs& a, int64_t row) {
  return a.index_qk + row * (int64_t{a.hi + 1} * a.di) + int64_t{a.hi} * a.di;
}

__device__ inline Dest indexer_dest(const KernelArgs& a, void* base, int64_t offset, bool on, bool zero) {
  return code_dest(base, offset, on, zero, a.index_fp8, a.index_kind, 1.0);
}

// The head row a task norms; for kQ and kK also the row it copies (gate, V).
template <Kind K>
__device__ inline const float* head_row(const KernelArgs& a, int64_t t, int head) {
  if constexpr (K == Kind::kIndexQ) return a.index_qk + t * (int64_t{a.hi + 1} * a.di) + int64_t{head} * a.di;
  if constexpr (K == Kind::kQ) return a.qg + (t * a.h + head) * 2 * a.d;
  return a.k + (t * a.g + head) * a.d;
}

template <Kind K>
__device__ inline const float* copy_row(const KernelArgs& a, int64_t t, int head) {
  if constexpr (K == Kind::kQ) return a.qg + (t * a.h + head) * 2 * a.d + a.d;
  return a.v + (t * a.g + head) * a.d;
}

// The K (V) row's copy in the KV cache, off for padding rows and slots
// outside the cache.
__device__ inline Dest kv_dest(const KernelArgs& a, bool ok, int64_t slot, int head, void* cache, double scale) {
  return code_dest(cache, ok ? (slot * a.g + head) * a.d : 0, ok, false, a.kv_fp8, a.kv_kind, scale);
}

// Head `head` of kind K of row t: loads, norm, RoPE and stores, in the order
// that keeps few registers live: all row loads, the row's metadata and RoPE
// positions (issued after them, none used before they are all in flight:
// earlier, they cost the widest kernels spills), then the cos/sin, the copy,
// the norm, the rotated stores. Padding rows compute like real rows and
// store zeros (Dest::zero), so token_to_req is on no load's path.
template <class S, Kind K, bool kFp8>
__device__ void head_task(const KernelArgs& a, int64_t t, int head) {
  constexpr bool kMain = K != Kind::kIndexQ, kCopy = K != Kind::kIndexQ;
  constexpr int P = S::kPairs, N = S::kSlots;  // the copied row: elements 2·lane + kGroup·n, + 1 in slots n, n + 1
  const RopeArgs& r = kMain ? a.rope_m : a.rope_i;
  const int dim = dim_of<S>(kMain ? a.d : a.di);
  float e[N];
  if constexpr (kCopy) {
    const float* src = copy_row<K>(a, t, head);
#pragma unroll
    for (int n = 0; n < N; n += 2) load_two<S>(src, 2 * group_lane() + kGroup * n, dim, e[n], e[n + 1]);
  }
  Row<S> x, w;
  load_row(head_row<K>(a, t, head), dim, r, x);
  load_row(K == Kind::kIndexQ ? a.w_iq : K == Kind::kQ ? a.w_q : a.w_k, dim, r, w);
  const int req = a.token_to_req[t];
  const int64_t slot = K == Kind::kK ? a.main_slot[t] : 0;
  int64_t pos[P];
  lane_positions<S>(r, [&](int axis) { return a.rope_pos[axis * a.num_tokens + t]; }, pos);
  double inv[P];
  lane_inv_freq<S>(r, inv);
  double c[P], s[P];
  lane_cos_sin<S>(r, pos, inv, c, s);
  const bool pad = req < 0 || req >= a.num_reqs;
  const bool kv_ok = K == Kind::kK && !pad && slot >= 0 && slot < a.kv_slots;
  if constexpr (kCopy) {  // the projections are bf16 values already: copies
    const Dest d = K == Kind::kQ ? bf16_dest(a.gate + (t * a.h + head) * a.d, true, pad)
                                 : kv_dest(a, kv_ok, slot, head, a.v_cache, a.v_scale);
    auto one = [&](int i, float v) { put<kFp8>(d, i, v); };
    auto two = [&](int i, float v0, float v1) { put2<kFp8>(d, i, v0, v1); };
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      const int i = 2 * group_lane() + kGroup * n;
      if (S::kFull || i < dim) store_two<S>(i, dim, a.vec2, e[n], e[n + 1], one, two);
    }
  }
  norm_row(dim, K == Kind::kIndexQ ? a.norm_iq : K == Kind::kQ ? a.norm_q : a.norm_k, r, w, x);
  Dest out;
  if constexpr (K == Kind::kIndexQ) out = indexer_dest(a, a.index_q, (t * a.hi + head) * a.di, true, pad);
  if constexpr (K == Kind::kQ) out = bf16_dest(a.q + (t * a.h + head) * a.d, true, pad);
  if constexpr (K == Kind::kK) out = bf16_dest(a.k_out + (t * a.g + head) * a.d, true, pad);
  const Dest cache = K == Kind::kK ? kv_dest(a, kv_ok, slot, head, a.k_cache, a.k_scale) : Dest{};
  rope_store_row<S>(
      dim, r, a.vec2, c, s, x,
      [&](int i, auto v) {
        put<kFp8>(out, i, v);
        if constexpr (K == Kind::kK) put<kFp8>(cache, i, v);
      },
      [&](int i, float v0, float v1) {
        put2<kFp8>(out, i, v0, v1);
        if constexpr (K == Kind::kK) put2<kFp8>(cache, i, v0, v1);
      });
}

// The members of a pooled group: member m < from_ring is the raw key in
// ring slot ring_base + (f0 + m) mod C (older than the step), member m >=
// from_ring the raw key of row row0 + (m - from_ring).
struct Members {
  int64_t row0 = 0;
  int from_ring = 0;
  int f0 = 0;
  int64_t ring_base = 0;
  int64_t fallback = 0;  // a slot inside the ring, read instead of one outside (validate_prepare rejects those)
};

__device__ inline const float* member_row(const KernelArgs& a, const Members& g, int m) {
  if (m >= g.from_ring) return raw_key(a, g.row0 + (m - g.from_ring));
  const int at = g.f0 + m;  // (f0 + m) mod C without a division: f0 < C, m < r <= C
  const int64_t slot = g.ring_base + (at < a.ring_capacity ? at : at - a.ring_capacity);
  return a.ring_keys + (slot >= 0 && slot < a.ring_slots ? slot : g.fallback) * a.di;
}

// The mean of group g's raw keys, normed, rotated at its first member's
// position (position(axis) reads it) and stored in compressed row `slot`.
template <class S, bool kFp8, class Position>
__device__ void pooled_task(const KernelArgs& a, const Members& g, int64_t slot, Position position) {
  constexpr int P = S::kPairs;
  const RopeArgs& r = a.rope_i;
  const int dim = dim_of<S>(a.di);
  int64_t pos[P];
  lane_positions<S>(r, position, pos);
  Row<S> x, w;
  pooled_row(dim, r, a.ratio, a.round_pool, [&](int m) { return member_row(a, g, m); }, x);
  load_row(a.w_ik, dim, r, w);  // after the sums: not live next to them
  double inv[P];
  lane_inv_freq<S>(r, inv);
  double c[P], s[P];
  lane_cos_sin<S>(r, pos, inv, c, s);
  norm_row(dim, a.norm_ik, r, w, x);
  const bool keep = slot >= 0 && slot < a.comp_rows;
  const Dest out = indexer_dest(a, a.compressed, keep ? slot * a.di : 0, keep, false);
  rope_store_row<S>(
      dim, r, a.vec2, c, s, x, [&](int i, auto v) { put<kFp8>(out, i, v); },
      [&](int i, float v0, float v1) { put2<kFp8>(out, i, v0, v1); });
}

// The pooling slot of row t: the group row t completes when all its members
// are rows of this step, rows t - (r - 1) .. t of one request (prepare.hip's
// top comment).
template <class S, bool kFp8>
__device__ void pool_slot_task(const KernelArgs& a, int64_t t) {
  const int64_t first_row = t - (a.ratio - 1);
  if (first_row < 0) return;
  const int req = a.token_to_req[t];
  const int64_t slot = a.compressed_slot[t];
  if (req < 0 || req >= a.num_reqs || a.token_to_req[first_row] != req || slot < 0 || slot >= a.comp_rows) return;
  Members g;
  g.row0 = first_row;
  // The pooled row rotates at its first member's position.
  pooled_task<S, kFp8>(a, g, slot, [&](int axis) { return a.rope_pos[axis * a.num_tokens + first_row]; });
}

// The ring writes of a request: its last C rows' raw keys and (t, h, w)
// positions, a row at a time (all loads of a row issued before its stores).
template <class S>
__device__ void write_ring(const KernelArgs& a, int64_t begin, int64_t end) {
  constexpr int N = S::kSlots;
  const int lane = group_lane();
  const int C = a.ring_capacity, di = dim_of<S>(a.di);
  for (int64_t row = end - begin > C ? end - C : begin; row < end; ++row) {
    const int64_t slot = a.ring_slot[row];
    const float* key = raw_key(a, row);
    float v[N];
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int i = lane + n * kGroup;
      v[n] = S::kFull || i < di ? key[i] : 0.0f;
    }
    const int64_t rope = lane < 3 ? a.rope_pos[lane * a.num_tokens + row] : 0;
    if (slot < 0 || slot >= a.ring_slots) continue;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int i = lane + n * kGroup;
      if (S::kFull || i < di) a.ring_keys[slot * di + i] = v[n];
    }
    if (lane < 3) a.ring_rope[slot * 3 + lane] = rope;
  }
}

// Request i's task: the pooling of its straddling group (started before the
// step, completed inside it), if it has one, then its ring writes.
template <class S, bool kFp8>
__device__ void request_task(const KernelArgs& a, int i) {
  const int r = a.ratio, C = a.ring_capacity;
  const int64_t begin = a.starts[i], end = a.starts[i + 1];
  const int64_t ring_base = int64_t{a.ring_blocks[i]} * C;
  const int64_t ctx = a.pos[begin];
  const int64_t first = ctx / r * r, last = first + r - 1;
  if (first != ctx && last < ctx + (end - begin)) {
    const int f0 = static_cast<int>(first % C);
    const int64_t slot0 = ring_base + f0;  // member 0 is older than the step
    const bool slot0_ok = slot0 >= 0 && slot0 < a.ring_slots;
    Members g;
    g.row0 = begin;
    g.from_ring = static_cast<int>(ctx - first);
    g.f0 = f0;
    g.ring_base = ring_base;
    g.fallback = slot0_ok ? slot0 : 0;
    pooled_task<S, kFp8>(a, g, a.compressed_slot[begin + (last - ctx)],
                         [&](int axis) { return slot0_ok ? a.ring_rope[slot0 * 3 + axis] : int64_t{0}; });
  }
  __threadfence_block();  // every ring read of the pooling happens before the writes below
  wave_barrier();
  write_ring<S>(a, begin, end);
}

}  // namespace qsa::gpu::prep
