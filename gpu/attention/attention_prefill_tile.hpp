// Device-side phases of the prefill sparse attention kernel
// (sparse_attention_prefill.hip), one function per phase of a 32-entry tile;
// sparse_attention_plan.hpp describes the kernel. Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/attention/attention_tile.hpp"
#include "gpu/common/bf16.hpp"
#include "gpu/common/wave.hpp"

namespace qsa::gpu::attn {

constexpr int kPrefillThreads = 256;
constexpr int kPrefillTile = 32;                                // entries per tile (kAttentionPrefillEntries)
constexpr int kLogitThreads = kPrefillThreads / kPrefillTile;  // threads sharing one entry's logits
constexpr int kSStride = kPrefillTile + 1;                      // odd: a wave's pairs hit distinct banks

// The decode kernel's arguments plus the plan (device copies).
struct PrefillArgs {
  KernelArgs k;               // k.head_chunks: blocks per KV group
  const int32_t* tiles;       // [num_tiles, 4]: first row, rows, first entry, entries
  const int32_t* ids;         // [num_entries]
  const uint32_t* masks;      // [num_entries]
  int64_t num_tokens;         // T
  int64_t num_entries;
  int rows_per_tile;
  int heads_per_block;        // heads of a full chunk
};

// Query rows of the block's (row, head) pairs as bf16 bits; the row stride
// D + 8 keeps 16-byte alignment and puts the 8 pairs one entry's threads
// read on distinct banks.
template <int D>
using PrefillQ = uint16_t[D + 8];

// Phase 1, kLogitThreads threads per entry, thread `sub` taking pairs sub,
// sub + kLogitThreads, ...: each pair's fp32 QK dot with the decode kernel's
// fma order, scaled (and rounded with p.round_logits); -inf where the pair's
// row does not attend the entry. Pairs past np get -inf too.
template <int D, int MAXP, class KvT>
__device__ void prefill_logits(const KernelArgs& a, int g, int hc, int np, const PrefillQ<D>* q_s,
                               const int64_t* slot_s, const uint32_t* mask_s, float (*s_s)[kSStride]) {
  constexpr int kPer = MAXP / kLogitThreads;
  static_assert(MAXP % kLogitThreads == 0, "pairs split evenly over an entry's threads");
  const int tid = static_cast<int>(threadIdx.x);
  const int e = tid / kLogitThreads;
  const int sub = tid % kLogitThreads;
  const int64_t slot = slot_s[e];  // -1 when no row of the tile attends the entry
  const uint32_t mask = mask_s[e];
  float s[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) s[i] = 0.0f;
  if (slot >= 0) {
    const KvT* krow = static_cast<const KvT*>(a.k_cache) + (slot * a.kv_heads + g) * D;
    for (int d = 0; d < D; d += 8) {
      float k[8];
      KvRow<KvT>::load8(krow + d, a.k_scale, a.fnuz, k);
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const uint4 w = *reinterpret_cast<const uint4*>(&q_s[sub + i * kLogitThreads][d]);
        float q[8];
        KvRow<uint16_t>::unpack(w.x, q[0], q[1]);
        KvRow<uint16_t>::unpack(w.y, q[2], q[3]);
        KvRow<uint16_t>::unpack(w.z, q[4], q[5]);
        KvRow<uint16_t>::unpack(w.w, q[6], q[7]);
        float acc = s[i];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = fmaf(q[j], k[j], acc);
        s[i] = acc;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int pair = sub + i * kLogitThreads;
    const bool attends = slot >= 0 && pair < np && ((mask >> (pair / hc)) & 1u) != 0u;
    float logit = -INFINITY;
    if (attends) logit = a.round_logits ? round_bf16(round_bf16(s[i]) * a.scale) : s[i] * a.scale;
    s_s[pair][e] = logit;
  }
}

// PV thread layout: thread (pg, dc) owns dims [dc*4, dc*4 + 4) of the pairs
// pg, pg + kGroups, ... (kPer of them).
template <int D, int MAXP>
struct PrefillPv {
  static constexpr int kDimThreads = D / kVec;
  static constexpr int kGroups = kPrefillThreads / kDimThreads;
  static constexpr int kPer = (MAXP + kGroups - 1) / kGroups;
  static_assert(kPrefillThreads % kDimThreads == 0, "head_dim must split into the thread layout");
};

// Phase 3: rescale by alpha, then acc += P V over the tile's entries that the
// pair's row attends (the mask, not P = 0, decides: a row must not see an inf
// or NaN in a V row it does not attend, as in the reference); V rows are read
// once per tile for all pairs.
template <int D, int MAXP, class KvT>
__device__ void prefill_pv(const KernelArgs& a, int g, int hc, int np, const float (*s_s)[kSStride],
                           const int64_t* slot_s, const uint32_t* mask_s, const float* alpha_s,
                           float (&acc)[PrefillPv<D, MAXP>::kPer][kVec]) {
  using L = PrefillPv<D, MAXP>;
  const int dc = static_cast<int>(threadIdx.x) % L::kDimThreads;
  const int pg = static_cast<int>(threadIdx.x) / L::kDimThreads;
  int row_of[L::kPer];  // the tile row of each owned pair, or -1 past np
#pragma unroll
  for (int i = 0; i < L::kPer; ++i) {
    const int pair = pg + i * L::kGroups;
    row_of[i] = pair < np ? pair / hc : -1;
    if (pair >= np) continue;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] *= alpha_s[pair];
  }
  const KvT* vbase = static_cast<const KvT*>(a.v_cache);
  for (int j = 0; j < kPrefillTile; ++j) {
    const int64_t slot = slot_s[j];
    if (slot < 0) continue;
    const uint32_t mask = mask_s[j];
    float v[kVec];
    KvRow<KvT>::load4(vbase + (slot * a.kv_heads + g) * D + dc * kVec, a.v_scale, a.fnuz, v);
#pragma unroll
    for (int i = 0; i < L::kPer; ++i) {
      if (row_of[i] < 0 || ((mask >> row_of[i]) & 1u) == 0u) continue;
      const float p = s_s[pg + i * L::kGroups][j];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(p, v[e], acc[i][e]);
    }
  }
}

}  // namespace qsa::gpu::attn
