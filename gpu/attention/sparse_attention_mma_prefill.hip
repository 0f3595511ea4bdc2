// The tensor-core prefill kernels (sparse_attention_mma.hpp describes
// them): the sm_80 union-tile kernel and its Hopper (wgmma) version, which
// share the plan's metadata pipeline, the masked softmax and the epilogue.
// NVIDIA only: on AMD this file compiles to "not supported" and the
// launcher keeps the portable prefill kernel.
#include <cmath>
#include <climits>
#include <cstdint>
#include <string>

#include "gpu/attention/fast_epilogue.hpp"
#include "gpu/attention/mma_step.hpp"
#include "gpu/attention/sparse_attention_mma.hpp"
#include "gpu/common/dependent_launch.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/common/exact_math.hpp"
#include "gpu/common/mma_sm80.hpp"
#include "gpu/common/wgmma_sm90.hpp"

namespace qsa::gpu::attn {

#if defined(QSA_GPU_CUDA)

namespace {

using namespace sm80;
using namespace mma;

// ---- The tensor-core prefill kernel (sparse_attention_mma.hpp) ----
//
// One block of kPfWarps warps per (tile of rows of one request, KV group,
// head chunk) of the plan (sparse_attention_plan.hpp): the tile's (row,
// head) pairs, at most kAttentionPrefillMaxPairs, are the rows of kPfWarps
// m16 tiles, one per warp, with no padding between rows (12 heads x 5 rows
// = 60 pairs in 4 tiles). The tile's entries (the union of its rows'
// selections) pass through shared memory once, 16 per step, for all pairs;
// each warp computes its 16 pairs' logits, masks those of entries a pair's
// row does not attend, and runs the decode kernel's online softmax and PV
// on them. The numerics are the bf16 decode kernel's per pair: the same
// logit mma chains, softmax_row, P rounded to bf16 as the A operand of the
// same k8 PV mmas, the same epilogue arithmetic.

constexpr int kPfWarps = 4;
constexpr int kPfBlock = kPfWarps * 32;
// Entries per step: two n8 tiles of S, two k8 PV mmas per output tile. With
// 8 (one tile) a warp's step was bound by its own latencies (ncu at share
// 0.99: 2 warps per scheduler, 0.3 eligible, 7.5 cycles per instruction, 25%
// issue), so a step's fixed cost (barrier, copy issue, softmax shuffles)
// is now paid per 16 entries.
constexpr int kPfNT = 16;
constexpr int kPfTiles = kPfNT / 8;
// Ring stages: 3 steps (48 KB at D = 256) in flight per block, which fits
// 2 blocks per SM (the registers allow no more). A 9-stage ring of 8-entry
// steps measured the same as 4 stages: the copies do not set the time.
constexpr int kPfStages = 4;
constexpr int kPfChunk = 256;     // entries whose slots and masks are resolved together, 2 per thread
// A kernel of kNT entries per step resolves chunk k + 1 while it consumes
// chunk k: its threads load the ids and masks at the chunk's step 0, the
// page-table entries those ids need at step kPagesStep, and publish the
// slots and masks at step kPublishStep. Each dependent load has a quarter
// of the chunk's steps or more to arrive, and the published chunk is
// visible (the next step's barrier) before the copies of its first step are
// issued, a kernel's look-ahead (ChunkSteps asserts it) before that step.
template <int kNT>
struct ChunkSteps {
  static constexpr int kSteps = kPfChunk / kNT;
  static constexpr int kPagesStep = kSteps / 4;
  static constexpr int kPublishStep = kSteps * 5 / 8;
  template <int kAhead>
  static constexpr bool published_before_copies() {
    return kPagesStep > 0 && kPagesStep < kPublishStep && kPublishStep + kAhead < kSteps;
  }
};
static_assert(kPfWarps * 16 == kAttentionPrefillMaxPairs, "one m16 tile of pairs per warp");
static_assert(kPfChunk == 2 * kPfBlock, "two entries per thread and chunk");
static_assert(ChunkSteps<kPfNT>::published_before_copies<kPfStages - 1>(),
              "a chunk's metadata is published before the copies of its first step");
static_assert(kAttentionPrefillMaxRows < 31, "tile rows are mask bits; bit 31 means no row");

// Shared memory: the pairs' Q rows (the decode kernel's padded pitch, pairs
// past the tile's count zero-filled), the ring of [K | V] tiles of 8 rows
// each (swizzled exactly like the decode kernel's bf16 tiles, so
// kv_lane_offsets, bf16_logits and bf16_pv read them unchanged), and two
// chunks of slots and masks.
template <int D>
struct PfSmem {
  static constexpr int kPitch = D + 8;
  static constexpr int kRowBytes = D * 2;
  static constexpr int kTileBytes = kPfNT * kRowBytes;
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kQ = 0;
  static constexpr int kRing = kQ + kAttentionPrefillMaxPairs * kPitch * 2;
  static constexpr int kSlots = kRing + kPfStages * kStageBytes;  // [2][kPfChunk] int32, -1: not attended
  static constexpr int kMasks = kSlots + 2 * kPfChunk * 4;         // [2][kPfChunk] uint32, bit r: tile row r attends
  static constexpr int kBytes = kMasks + 2 * kPfChunk * 4;
  static_assert(kRowBytes == Smem<D, uint16_t>::kKPitch, "the decode kernel's bf16 row layout");
  static_assert(kPfStages * kStageBytes == kAttentionPrefillMaxPairs * D * 4 && kBytes - kSlots >= 4 * kAttentionPrefillMaxPairs,
                "pf_store stages the outputs in the ring and their l in the slots after it");
  static_assert(kRing % 128 == 0 && kRowBytes % 128 == 0 && kStageBytes % 128 == 0,
                "swizzled rows start on 128-byte boundaries");
  static_assert(kRing - kQ >= kAttentionPrefillMaxPairs * D * 2, "pf_store stages the gates in the Q tile");
};

// This thread's two entries (tid and tid + kPfBlock) of the chunk being
// resolved, between its loads and its publication.
struct PfMeta {
  int32_t id[2];
  uint32_t mask[2];
  int page[2];
  int32_t phys[2];
};

// What every phase of a block needs of its tile.
struct PfTile {
  int64_t e0 = 0, ne = 0;  // the tile's entries in the plan
  int req = 0;
  int64_t seq_len = 0;
  uint32_t rows_ok = 0;    // rows of the tile that belong to req
};

// Chunk k's ids and masks (past the tile: none). Only loaded here: using a
// mask at once (it was `& rows_ok`) waited out the load's whole latency in
// the step that issued it (ncu, docs/performance.md, twenty-first pass).
__device__ inline void pf_load_ids(const PrefillArgs& pa, const PfTile& tl, int k, PfMeta& m) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t e = int64_t{k} * kPfChunk + static_cast<int>(threadIdx.x) + j * kPfBlock;
    const bool in = e < tl.ne;
    m.id[j] = in ? pa.ids[tl.e0 + e] : -1;
    m.mask[j] = in ? pa.masks[tl.e0 + e] : 0u;
  }
}

// Their masks without the rows outside rows_ok, and their page-table entries
// (none for entries no row attends).
__device__ inline void pf_load_pages(const KernelArgs& a, const PfTile& tl, PfMeta& m) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    m.mask[j] &= tl.rows_ok;
    m.page[j] = m.mask[j] != 0u ? page_of(a, m.id[j]) : -1;
    m.phys[j] = m.page[j] >= 0 ? a.block_table[static_cast<int64_t>(tl.req) * a.max_pages + m.page[j]] : -1;
  }
}

// Their slots (resolve_slot's rule) and masks into buffer k & 1; an entry
// whose id does not resolve is attended by no row (slot -1, mask 0).
__device__ inline void pf_publish(const KernelArgs& a, const PfTile& tl, int k, const PfMeta& m, int32_t* slots_s,
                                  uint32_t* masks_s) {
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t slot = m.mask[j] != 0u ? slot_on_page(a, tl.seq_len, m.id[j], m.page[j], m.phys[j]) : -1;
    const int i = (k & 1) * kPfChunk + static_cast<int>(threadIdx.x) + j * kPfBlock;
    slots_s[i] = slot >= 0 ? static_cast<int32_t>(slot) : -1;
    masks_s[i] = slot >= 0 ? m.mask[j] : 0u;
  }
}

// The copies of kRows rows of one cache (K or V) of KV group g, 16 bytes
// per copy, zero-filled for slot -1, spread over the block: warp w copies
// rows w kRows / kPfWarps.. of the step, 32 / (D / 8) rows per
// instruction, each lane the same 16-byte piece of its rows; dst(r, c) is
// the shared address of piece c of row r. So a warp's slots are one or two
// 16-byte shared loads issued together (one per row, each waited for by its
// address, drew the most stall samples of the Hopper kernel's step: ncu,
// docs/performance.md, twentieth pass) and a source address is one wide
// multiply-add.
template <int D, int kRows, class Dst>
__device__ void pf_copy_rows(const void* cache, uint32_t row_bytes, int g, const int32_t* slots, Dst dst) {
  constexpr int kPieces = D / 8;              // 16-byte pieces of a bf16 row
  constexpr int kRowsPer = 32 / kPieces;      // rows one warp instruction covers
  constexpr int kWarpRows = kRows / kPfWarps;  // rows per warp
  static_assert(kWarpRows % 4 == 0 && kRowsPer <= kWarpRows, "a warp's slots are whole int4");
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = lane32();
  const int c = lane % kPieces, sub = lane / kPieces;  // this lane's piece, and its row within an instruction's
  int32_t sl[kWarpRows];
#pragma unroll
  for (int k = 0; k < kWarpRows / 4; ++k) {
    const int4 v = reinterpret_cast<const int4*>(slots + warp * kWarpRows)[k];
    sl[4 * k] = v.x;
    sl[4 * k + 1] = v.y;
    sl[4 * k + 2] = v.z;
    sl[4 * k + 3] = v.w;
  }
  const auto* base = static_cast<const unsigned char*>(cache) + static_cast<uint64_t>(g) * D * 2 + c * 16;
#pragma unroll
  for (int k = 0; k < kWarpRows / kRowsPer; ++k) {
    int32_t slot = sl[k * kRowsPer];
#pragma unroll
    for (int j = 1; j < kRowsPer; ++j) slot = sub == j ? sl[k * kRowsPer + j] : slot;
    const int r = warp * kWarpRows + k * kRowsPer + sub;
    cp_async16_unless_negative(dst(r, c), mad_wide_u32(static_cast<uint32_t>(max(slot, 0)), row_bytes, base), slot);
  }
}

// The copies of one step's kPfNT K and V rows into a ring stage of the
// sm_80 kernel (the decode kernel's swizzled rows).
template <int D>
__device__ void pf_issue(const KernelArgs& a, int g, const int32_t* slots, uint32_t stage) {
  using L = PfSmem<D>;
  const uint32_t row_bytes = static_cast<uint32_t>(a.kv_heads) * L::kRowBytes;
  auto dst = [stage](int r, int c) {
    return stage + static_cast<uint32_t>(r * L::kRowBytes) + ((static_cast<uint32_t>(c) * 16) ^ Smem<D, uint16_t>::k_swizzle(r));
  };
  pf_copy_rows<D, kPfNT>(a.k_cache, row_bytes, g, slots, dst);
  pf_copy_rows<D, kPfNT>(a.v_cache, row_bytes, g, slots, [dst](int r, int c) { return dst(r, c) + L::kTileBytes; });
}

// One pair's output the slow, exact way, by one warp: the reference's
// rule that a row is influenced only by the ids it attends. The tensor-core
// path multiplies P = 0 by the V rows of entries a pair's row does not
// attend, so an inf or NaN in such a row (which another row of the tile
// does attend) would reach it; the epilogue sends every pair whose output
// is not finite here. Lanes take 32 entries at a time (logits in fp32, the
// online softmax with expf, P rounded to bf16) and then own dims lane +
// 32k of the output. Only for non-finite outputs: it is not fast.
template <int D>
__device__ void pf_exact_pair(const PrefillArgs& pa, const PfTile& tl, int g, int pair_row, int64_t out0,
                              const uint16_t* q) {
  const KernelArgs& a = pa.k;
  const int lane = lane32();
  constexpr int kDims = D / 32;
  float o[kDims];
#pragma unroll
  for (int k = 0; k < kDims; ++k) o[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const auto* k_cache = static_cast<const uint16_t*>(a.k_cache);
  const auto* v_cache = static_cast<const uint16_t*>(a.v_cache);
  for (int64_t base = 0; base < tl.ne; base += 32) {
    const int64_t e = base + lane;
    int64_t slot = -1;
    if (e < tl.ne && ((pa.masks[tl.e0 + e] & tl.rows_ok) >> pair_row & 1u) != 0u)
      slot = resolve_slot(a, tl.req, tl.seq_len, pa.ids[tl.e0 + e]);
    float s = -INFINITY;
    if (slot >= 0) {
      const uint16_t* krow = k_cache + (slot * a.kv_heads + g) * D;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = fmaf(bf16_to_float(q[d]), bf16_to_float(krow[d]), dot);
      dot *= a.k_scale;
      s = a.round_logits ? round_bf16(round_bf16(dot) * a.scale) : dot * a.scale;
    }
    float mx = s;
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o2));
    const float m_new = fmaxf(m, mx);
    const float w = slot >= 0 && m_new != -INFINITY ? expf(s - m_new) : 0.0f;
    float sum = w;
#pragma unroll
    for (int o2 = 16; o2 > 0; o2 >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o2);
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    l = l * alpha + sum;
    m = m_new;
    const float pw = round_bf16(w);
#pragma unroll
    for (int k = 0; k < kDims; ++k) o[k] *= alpha;
    for (int j = 0; j < 32; ++j) {
      const int64_t sj = __shfl_sync(0xffffffffu, slot, j);
      const float pj = __shfl_sync(0xffffffffu, pw, j);
      if (sj < 0) continue;  // the mask decides, not P = 0
      const uint16_t* vrow = v_cache + (sj * a.kv_heads + g) * D;
#pragma unroll
      for (int k = 0; k < kDims; ++k) o[k] = fmaf(pj, bf16_to_float(vrow[lane + 32 * k]), o[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kDims; ++k) {
    const float x = o[k] * a.v_scale;
    store_output(a, out0 + lane + 32 * k, softmax_normalized(x, l));
  }
}

// A prefill block's place in the plan: its tile's first row and row count,
// its KV group, its chunk's first head and head count, its (row, head)
// pairs (pair p is row p / hc, head h0 + p % hc).
struct PfBlock {
  int64_t row0 = 0;
  int nrows = 0;
  int g = 0, h0 = 0, hc = 0, np = 0;
  // Output (and Q) offset of pair p's row.
  __device__ int64_t pair_offset(const KernelArgs& a, int p, int d) const {
    return ((row0 + p / hc) * a.heads + h0 + p % hc) * d;
  }
};

// The block's tile and its request, with the scalar prefill kernel's guards
// on the plan: false for a tile outside the step (nothing written); bad
// entry ranges and padding rows attend nothing.
__device__ inline bool pf_block(const PrefillArgs& pa, PfBlock& b, PfTile& tl) {
  const KernelArgs& a = pa.k;
  const int32_t* tile = pa.tiles + static_cast<int64_t>(blockIdx.x) * 4;
  b.row0 = tile[0];
  b.nrows = tile[1];
  b.g = static_cast<int>(blockIdx.y) / a.head_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % a.head_chunks;
  const int group = a.heads / a.kv_heads;
  b.h0 = b.g * group + chunk * pa.heads_per_block;
  b.hc = min(pa.heads_per_block, group - chunk * pa.heads_per_block);
  b.np = b.nrows * b.hc;
  if (b.row0 < 0 || b.nrows < 1 || b.nrows > pa.rows_per_tile || b.row0 + b.nrows > pa.num_tokens || b.hc < 1 ||
      b.np > kAttentionPrefillMaxPairs)
    return false;
  tl.e0 = tile[2];
  tl.ne = tile[3];
  if (tl.e0 < 0 || tl.ne < 0 || tl.e0 + tl.ne > pa.num_entries) tl.ne = 0;
  tl.req = a.token_to_req[b.row0];
  const bool real = tl.req >= 0 && tl.req < a.num_reqs;
  tl.seq_len = real ? a.seq_lens[tl.req] : 0;
  if (!real) tl.ne = 0;
  for (int r = 0; r < b.nrows; ++r)
    if (a.token_to_req[b.row0 + r] == tl.req) tl.rows_ok |= 1u << r;
  return true;
}

// Step t's share of resolving the next chunk (ChunkSteps says when each
// phase runs), between the step's barrier and its copies.
template <int kNT>
__device__ inline void pf_next_chunk(const PrefillArgs& pa, const PfTile& tl, int t, PfMeta& meta, int32_t* slots_s,
                                     uint32_t* masks_s) {
  using C = ChunkSteps<kNT>;
  const int kc = t / C::kSteps, ts = t % C::kSteps;
  if (int64_t{kc + 1} * kPfChunk < tl.ne) {  // a next chunk exists, so this one has all its steps
    if (ts == 0) pf_load_ids(pa, tl, kc + 1, meta);
    if (ts == C::kPagesStep) pf_load_pages(pa.k, tl, meta);
    if (ts == C::kPublishStep) pf_publish(pa.k, tl, kc + 1, meta, slots_s, masks_s);
  }
}

// The pairs' Q rows into shared memory (pairs past np zero-filled), in a
// commit group of their own ahead of the ring's; dst(pair, c) is the
// shared address of elements c..c+7 of the pair's row in the kernel's layout.
template <int D, class Dst>
__device__ void pf_load_q(const KernelArgs& a, const PfBlock& b, Dst dst) {
  for (int i = static_cast<int>(threadIdx.x); i < kAttentionPrefillMaxPairs * (D / 8); i += kPfBlock) {
    const int pair = i / (D / 8), c = (i % (D / 8)) * 8;
    const bool valid = pair < b.np;
    const uint16_t* src = valid ? a.q + b.pair_offset(a, pair, D) + c : a.q;
    cp_async16(dst(pair, c), src, valid);
  }
  cp_async_commit();
}

// Chunk 0's slots and masks, resolved and published to the block.
__device__ inline void pf_first_chunk(const PrefillArgs& pa, const PfTile& tl, PfMeta& meta, int32_t* slots_s,
                                      uint32_t* masks_s) {
  pf_load_ids(pa, tl, 0, meta);
  pf_load_pages(pa.k, tl, meta);
  pf_publish(pa.k, tl, 0, meta, slots_s, masks_s);
  __syncthreads();
}

// Where step t's kNT entries start in the two chunk buffers (slots and
// masks share the layout).
template <int kNT>
__device__ inline int pf_step_offset(int t) {
  using C = ChunkSteps<kNT>;
  return ((t / C::kSteps) & 1) * kPfChunk + (t % C::kSteps) * kNT;
}

// Step t's slots.
template <int kNT>
__device__ inline const int32_t* pf_step_slots(const int32_t* slots_s, int t) {
  return slots_s + pf_step_offset<kNT>(t);
}

// Those masks in registers, one 8-byte load per n8 tile (its two entries
// are adjacent): m[2n + j] is entry 8n + 2tq + j's. Loaded where the
// softmax used them, each was a shared-memory round trip on its path; the
// Hopper kernel loads them before it waits for the logits.
template <int kTiles>
struct PfMasks {
  uint32_t m[2 * kTiles];
};
template <int kNT>
__device__ inline PfMasks<kNT / 8> pf_load_masks(const uint32_t* masks_s, int t) {
  const uint32_t* mk = masks_s + pf_step_offset<kNT>(t) + 2 * (lane32() & 3);  // this lane's entries 2tq, 2tq + 1
  PfMasks<kNT / 8> r;
#pragma unroll
  for (int n = 0; n < kNT / 8; ++n) {
    const uint2 v = *reinterpret_cast<const uint2*>(mk + 8 * n);
    r.m[2 * n] = v.x;
    r.m[2 * n + 1] = v.y;
  }
  return r;
}

// One step of this lane's two pair rows (tile rows tr0, tr1; 31: none):
// the logits s4 (n8 tile n, mma layout) scaled and rounded as the decode
// kernel does, masked to the entries each row attends (mk: the step's
// masks), through the online softmax. r0, r1 get the weights; the return
// values are the rows' rescale factors.
struct PfAlpha {
  float a0, a1;
};
template <int kTiles>
__device__ inline PfAlpha pf_softmax(const KernelArgs& a, float (&s4)[kTiles][4], const PfMasks<kTiles>& mk, int tr0, int tr1,
                                     float (&r0)[2 * kTiles], float (&r1)[2 * kTiles], float& m0, float& m1, float& l0,
                                     float& l1) {
  if (a.round_logits) {
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[n][e] = round_bf16(round_bf16(s4[n][e]) * a.scale);
  } else {
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[n][e] *= a.scale;
  }
  // Entries 8n + 2tq, 8n + 2tq + 1: a logit counts where the pair's row attends the entry.
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint32_t m = mk.m[2 * n + j];
      r0[2 * n + j] = (m >> tr0) & 1u ? s4[n][j] : -INFINITY;
      r1[2 * n + j] = (m >> tr1) & 1u ? s4[n][2 + j] : -INFINITY;
    }
  return {softmax_row(r0, m0, l0), softmax_row(r1, m1, l1)};
}

// O's rows scaled by their alphas (rows gq: a0, gq + 8: a1), skipped by a
// warp none of whose rows' max moved (the lazy max makes that the rule).
template <int D>
__device__ inline void pf_rescale(float (&acc)[D / 8][4], PfAlpha al) {
  if (!__any_sync(0xffffffffu, al.a0 != 1.0f || al.a1 != 1.0f)) return;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    acc[i][0] *= al.a0;
    acc[i][1] *= al.a0;
    acc[i][2] *= al.a1;
    acc[i][3] *= al.a1;
  }
}

// The end of a block, in two phases through shared memory:
//  1. every warp writes its accumulators (rows gq and gq + 8 of its m16
//     tile: pairs p0 = 16 warp + gq and p0 + 8) and their l to `stage`, the
//     ring, free once every step is done: [64 pairs][D] fp32, the 8-float
//     chunk c of pair p at chunk c ^ (p & 7), so the fragments' stores hit
//     32 different banks, then l per pair. Before that, the block's gate
//     rows start copying into `gate_stage` (the Q tile, also free now:
//     [64 pairs][D] bf16), so their one round trip runs under the stores;
//  2. every warp takes whole pairs (warp, warp + 4, ...), and its lanes own
//     D / 32 adjacent dims of the pair's output row: the gate reads and the
//     A and gated stores are contiguous vectors, and the body is a loop over
//     pairs.
// Why: stored straight from the fragments (two elements per lane at a time,
// each with a gate load the compiler could not hoist above the previous
// element's stores, which might alias it) the epilogue unrolled to ~9,600
// instructions per warp and drew a third of the Hopper kernel's stall samples
// at share 0.99, waiting on instruction fetch and on those loads (ncu,
// docs/performance.md, eighteenth pass); loaded in the loop, the gates
// still cost a round trip per pair and warp. Both phases take a warp's
// pairs in the same order, so lane k computes the output offset of the
// warp's k-th pair once (an integer division) and the loops shuffle it.
// The outputs are store_output's bits (acc · v_scale / l, then
// store_gated's roundings): outputs_fast's, or the plain arithmetic
// where it declines. A pair whose output or l is not finite is recomputed
// exactly instead (pf_exact_pair, Q from global memory: its shared copy is
// gone). The caller has waited for its own copies; the barrier below waits
// for everyone's reads of the ring and of Q.
template <int D>
__device__ void pf_store(const PrefillArgs& pa, const PfTile& tl, const PfBlock& b, const float (&acc)[D / 8][4],
                         float l0, float l1, unsigned char* stage, unsigned char* gate_stage) {
  const KernelArgs& a = pa.k;
  const int lane = lane32(), warp = static_cast<int>(threadIdx.x) >> 5, gq = lane >> 2, tq = lane & 3;
  float* o_s = reinterpret_cast<float*>(stage);
  float* l_s = o_s + kAttentionPrefillMaxPairs * D;
  const uint16_t* g_s = reinterpret_cast<const uint16_t*>(gate_stage);
  const int p0 = warp * 16 + gq, p1 = p0 + 8;  // p0 & 7 == p1 & 7 == gq
  static_assert(kAttentionPrefillMaxPairs <= 32 * kPfWarps, "a warp's pairs fit its lanes");
  const int lane_pair = warp + kPfWarps * lane;
  const int64_t lane_row = lane_pair < b.np ? b.pair_offset(a, lane_pair, D) : 0;
  __syncthreads();
#pragma unroll 1
  for (int k = 0, p = warp; p < b.np; ++k, p += kPfWarps) {
    const int64_t row = __shfl_sync(0xffffffffu, lane_row, k);
    for (int c = lane * 8; c < D; c += 32 * 8)
      cp_async16(smem_addr(gate_stage) + static_cast<uint32_t>(p * D + c) * 2, a.gate + row + c, true);
  }
  cp_async_commit();
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int col = ((i ^ gq) * 8) + 2 * tq;
    *reinterpret_cast<float2*>(o_s + p0 * D + col) = make_float2(acc[i][0], acc[i][1]);
    *reinterpret_cast<float2*>(o_s + p1 * D + col) = make_float2(acc[i][2], acc[i][3]);
  }
  if (tq == 0) {
    l_s[p0] = l0;
    l_s[p1] = l1;
  }
  cp_async_wait<0>();
  __syncthreads();
  constexpr int kPer = D / 32;
  static_assert(kPer <= 8 && 8 % kPer == 0, "a lane's dims lie inside one 8-float chunk");
  const int j0 = lane * kPer;
#pragma unroll 1
  for (int k = 0, p = warp; p < b.np; ++k, p += kPfWarps) {
    const int64_t row = __shfl_sync(0xffffffffu, lane_row, k);
    const OutVec<uint16_t, kPer> gate = *reinterpret_cast<const OutVec<uint16_t, kPer>*>(g_s + p * D + j0);
    const float l = l_s[p];
    const OutVec<float, kPer> x = *reinterpret_cast<const OutVec<float, kPer>*>(o_s + p * D + ((j0 / 8) ^ (p & 7)) * 8 + j0 % 8);
    bool bad = !isfinite(l);
#pragma unroll
    for (int e = 0; e < kPer; ++e) bad |= !isfinite(x.v[e]);
    if (__any_sync(0xffffffffu, bad)) {  // (uniform per warp)
      pf_exact_pair<D>(pa, tl, b.g, p / b.hc, row, a.q + row);
      continue;
    }
    OutVec<float, kPer> out;
    OutVec<uint16_t, kPer> gated;
    if (!outputs_fast(a, x, l, gate, out, gated)) outputs_plain(a, x, l, gate, out, gated);
    *reinterpret_cast<OutVec<float, kPer>*>(a.attn + row + j0) = out;
    *reinterpret_cast<OutVec<uint16_t, kPer>*>(a.gated + row + j0) = gated;
  }
}

template <int D>
__global__ void __launch_bounds__(kPfBlock) mma_prefill_kernel(PrefillArgs pa) {
  using L = PfSmem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  if (smem_addr(smem) % 128 != 0) __trap();  // the swizzle XORs address bits (see the decode kernel)
  wait_for_primary();
  allow_dependent_launch();
  const KernelArgs& a = pa.k;
  const int tid = static_cast<int>(threadIdx.x), lane = lane32(), warp = tid >> 5;
  const int gq = lane >> 2;
  PfBlock b;
  PfTile tl;
  if (!pf_block(pa, b, tl)) return;

  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + L::kQ);
  int32_t* slots_s = reinterpret_cast<int32_t*>(smem + L::kSlots);
  uint32_t* masks_s = reinterpret_cast<uint32_t*>(smem + L::kMasks);
  const uint32_t ring = smem_addr(smem + L::kRing);

  pf_load_q<D>(a, b, [&](int pair, int c) { return smem_addr(q_s + pair * L::kPitch + c); });
  // Chunk 0's slots and masks, then the ring's first kPfStages - 1 steps.
  PfMeta meta;
  pf_first_chunk(pa, tl, meta, slots_s, masks_s);
  const int steps = static_cast<int>((tl.ne + kPfNT - 1) / kPfNT);
  for (int s = 0; s < kPfStages - 1; ++s) {
    if (s < steps) pf_issue<D>(a, b.g, slots_s + s * kPfNT, ring + s * L::kStageBytes);
    cp_async_commit();
  }

  const int p0 = warp * 16 + gq, p1 = p0 + 8;  // this lane's pair rows gq and gq + 8 of the warp's tile
  const bool warp_live = warp * 16 < b.np;
  const int tr0 = p0 < b.np ? p0 / b.hc : 31, tr1 = p1 < b.np ? p1 / b.hc : 31;  // their tile rows (31: none)
  const uint32_t q_lane =
      smem_addr(q_s) + ((warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * L::kPitch + (lane >> 4) * 8) * 2;
  uint32_t kv_off[2];
  kv_lane_offsets<D>(lane, kv_off);
  constexpr int kDimTiles = D / 8;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float acc[kDimTiles][4];
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;

  for (int t = 0; t < steps; ++t) {
    cp_async_wait<kPfStages - 2>();  // this thread's copies of step t (and Q) have landed
    __syncthreads();                 // everyone's have; step t - 1's stage and metadata are free
    pf_next_chunk<kPfNT>(pa, tl, t, meta, slots_s, masks_s);
    const int next = t + kPfStages - 1;
    if (next < steps) pf_issue<D>(a, b.g, pf_step_slots<kPfNT>(slots_s, next), ring + (next % kPfStages) * L::kStageBytes);
    cp_async_commit();
    if (!warp_live) continue;  // (uniform per warp: a warp without pairs only copies)
    const uint32_t kt = ring + (t % kPfStages) * L::kStageBytes;
    // S for the step's kPfTiles n8 tiles of entries (rows 8n.. of the K tile,
    // swizzled like rows 0..7), each as the decode kernel's four chains.
    float s4[kPfTiles][4];
#pragma unroll
    for (int n = 0; n < kPfTiles; ++n) {
      float sc[kChains][4] = {};
      const uint32_t k_lane[2] = {kt + n * 8 * L::kRowBytes + kv_off[0], kt + n * 8 * L::kRowBytes + kv_off[1]};
      bf16_logits<D>(sc, q_lane, k_lane);
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[n][e] = ((sc[0][e] + sc[1][e]) + (sc[2][e] + sc[3][e])) * a.k_scale;
    }
    float r0[2 * kPfTiles], r1[2 * kPfTiles];
    const PfAlpha al = pf_softmax(a, s4, pf_load_masks<kPfNT>(masks_s, t), tr0, tr1, r0, r1, m0, m1, l0, l1);
    if (t > 0) pf_rescale<D>(acc, al);
#pragma unroll
    for (int n = 0; n < kPfTiles; ++n) {
      const uint32_t vt = kt + L::kTileBytes + n * 8 * L::kRowBytes;
      const uint32_t v_lane[2] = {vt + kv_off[0], vt + kv_off[1]};
      bf16_pv<D>(acc, p_bf16x2(r0[2 * n], r0[2 * n + 1]), p_bf16x2(r1[2 * n], r1[2 * n + 1]), v_lane);
    }
  }
  cp_async_wait<0>();  // no copy may outlive the block (the last groups are empty)
  pf_store<D>(pa, tl, b, acc, l0, l1, smem + L::kRing, smem + L::kQ);
}

// ---- The Hopper prefill kernel (sm_90a: sparse_attention_mma.hpp) ----
//
// The union-tile kernel above with its matrix products on warpgroup mmas:
// the block's 4 warps are one warpgroup, the tile's 64 pair rows its M. Per
// step, S[64 pairs, kWgNT entries] = Q K^T is D/16 wgmmas with both operands
// in shared memory, and O[64, D] += P V is D/64 wgmmas of n64 per k16 slice
// of entries, with P from registers and V in shared memory, read
// transposed: no ldmatrix, no Q fragments loaded per n8 tile (the mma.sync
// kernel loaded Q once per n8 tile of every step, most of its shared-memory
// reads). The fragments of S, P and O per warp are the mma.sync kernel's, so
// masking, the online softmax, P's bf16 rounding and the epilogue are the
// same code. Q and the tiles use wgmma's 128-byte-swizzled atoms
// (sm90::sw128_offset).
//
// Entries per step: 32, twice the sm_80 kernel's. A step of one warpgroup
// is a chain of fixed latencies (the barrier, the S wgmma chain, the
// softmax's shuffles, the waits) at 2 warps per scheduler (ncu,
// docs/performance.md, eighteenth pass); 32 entries pay that chain once per
// 32, as 16 did for 8 (-21 to -26%, sixteenth pass). The shared memory
// stays that of 2 blocks per SM because K and V have rings of their own,
// of two tiles each: step t's copies are K of step t + 1 and V of step t,
// so V lands one step after its K, when its PV runs (the PV of step t is
// issued in step t + 1, under that step's softmax), and each tile is
// rewritten only after the wgmma that read it was waited for before the
// step's barrier.
constexpr int kWgNT = 32;
static_assert(ChunkSteps<kWgNT>::published_before_copies<1>(), "a chunk is published before its first copies (one step ahead)");

template <int D>
struct WgSmem {
  static constexpr int kTileBytes = kWgNT * D * 2;  // a K or V tile: [D / 64][kWgNT rows][128 bytes]
  static constexpr int kQ = 0;                      // [D / 64][64 pairs][128 bytes]
  static constexpr int kK = kQ + kAttentionPrefillMaxPairs * D * 2;  // two K tiles
  static constexpr int kV = kK + 2 * kTileBytes;                     // two V tiles
  static constexpr int kSlots = kV + 2 * kTileBytes;
  static constexpr int kMasks = kSlots + 2 * kPfChunk * 4;
  static constexpr int kUsed = kMasks + 2 * kPfChunk * 4;
  static constexpr int kBytes = kUsed + 1024;  // the atoms need a 1024-byte aligned base: room to align it
  static_assert(kSlots - kK == kAttentionPrefillMaxPairs * D * 4 && kUsed - kSlots >= 4 * kAttentionPrefillMaxPairs,
                "pf_store stages the outputs in the tiles and their l in the slots after them");
  static_assert(kK % 1024 == 0 && kTileBytes % 1024 == 0 && (kWgNT * 128) % 1024 == 0,
                "every atom of Q, K and V starts 1024-byte aligned");
  static_assert(kK - kQ >= kAttentionPrefillMaxPairs * D * 2, "pf_store stages the gates in the Q tile");
};

// The copies of kWgNT rows of one cache (K or V) into a tile in the atom
// layout (pf_copy_rows: 8 rows per warp).
template <int D>
__device__ void wg_issue(const void* cache, uint32_t row_bytes, int g, const int32_t* slots, uint32_t tile) {
  pf_copy_rows<D, kWgNT>(cache, row_bytes, g, slots,
                         [tile](int r, int c) { return tile + sm90::sw128_offset(kWgNT, r, 8 * c); });
}

template <int D>
__global__ void __launch_bounds__(kPfBlock) wgmma_prefill_kernel(PrefillArgs pa) {
#if QSA_WGMMA
  using L = WgSmem<D>;
  constexpr int kTiles = kWgNT / 8;    // n8 tiles of S per step
  constexpr int kSlices = kWgNT / 16;  // k16 slices of P per step
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  unsigned char* smem = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  wait_for_primary();
  allow_dependent_launch();
  const KernelArgs& a = pa.k;
  const int tid = static_cast<int>(threadIdx.x), lane = lane32(), warp = tid >> 5;
  const int gq = lane >> 2;
  PfBlock b;
  PfTile tl;
  if (!pf_block(pa, b, tl)) return;  // (uniform per block, as every exit before the last wgmma must be)

  const uint32_t q_base = smem_addr(smem + L::kQ);
  int32_t* slots_s = reinterpret_cast<int32_t*>(smem + L::kSlots);
  uint32_t* masks_s = reinterpret_cast<uint32_t*>(smem + L::kMasks);
  const uint32_t k_ring = smem_addr(smem + L::kK), v_ring = smem_addr(smem + L::kV);
  const uint32_t row_bytes = static_cast<uint32_t>(a.kv_heads) * D * 2;  // a slot's offset: one 32 x 32 -> 64-bit product

  pf_load_q<D>(a, b, [&](int pair, int c) { return q_base + sm90::sw128_offset(kAttentionPrefillMaxPairs, pair, c); });
  PfMeta meta;
  pf_first_chunk(pa, tl, meta, slots_s, masks_s);
  const int steps = static_cast<int>((tl.ne + kWgNT - 1) / kWgNT);
  if (steps > 0) wg_issue<D>(a.k_cache, row_bytes, b.g, slots_s, k_ring);
  cp_async_commit();

  // Every warp runs every wgmma (they are warpgroup-wide); rows of pairs
  // past np hold zero Q and mask every entry, and are not stored.
  const int p0 = warp * 16 + gq, p1 = p0 + 8;
  const int tr0 = p0 < b.np ? p0 / b.hc : 31, tr1 = p1 < b.np ? p1 / b.hc : 31;
  constexpr int kDimTiles = D / 8;
  constexpr uint32_t kAtom = 1024;         // SBO: 8 rows of 128 bytes
  constexpr uint32_t kCol = kWgNT * 128;   // a tile's atom column (LBO of the MN-major V)
  // Descriptors are built once and moved by adding 16-byte units to their
  // start field (bits 0-13; shared addresses stay below 2^18, so no carry):
  // building each from an address cost 12 uniform instructions per wgmma, a
  // third of a step's instructions (ncu).
  const uint64_t q_desc = sm90::sw128_desc(q_base, 16, kAtom);
  const uint64_t k_desc0 = sm90::sw128_desc(k_ring, 16, kAtom);
  const uint64_t v_desc0 = sm90::sw128_desc(v_ring, kCol, kAtom);
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float acc[kDimTiles][4];
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
  uint32_t p_prev[kSlices][4] = {};  // step t - 1's P, the A operand of its PV, per k16 slice
  // O += P V of step u (P in p_prev): dims 64nb.. from atom column nb of its
  // V tile, read MN-major; entries 16j.. of slice j lie 16 rows on.
  auto issue_pv = [&](int u) {
    const uint64_t vd = v_desc0 + ((u & 1) * L::kTileBytes >> 4);
#pragma unroll
    for (int nb = 0; nb < D / 64; ++nb)
#pragma unroll
      for (int j = 0; j < kSlices; ++j)
        sm90::wgmma_m64n64k16_rs_mn(*reinterpret_cast<float(*)[8][4]>(&acc[8 * nb]), p_prev[j],
                                    vd + ((nb * kCol + j * 16 * 128) >> 4));
    sm90::wgmma_commit();
  };

  // Step t: S = Q K^T of step t, then the PV of step t - 1, both in flight
  // while this step's softmax waits only for S; the rescale of O by step
  // t's alphas waits for that PV. So the tensor cores run step t - 1's PV
  // under step t's softmax (one warpgroup has nothing else to overlap).
  for (int t = 0; t < steps; ++t) {
    cp_async_wait<0>();  // this thread's copies of K(t) and V(t - 1) (and, at step 0, Q) have landed
    sm90::fence_proxy_async_smem();  // the copies' bytes, for the wgmmas' async reads
    __syncthreads();  // everyone's have; every warp has waited for step t - 1's S and step t - 2's PV
    const uint64_t kd = k_desc0 + ((t & 1) * L::kTileBytes >> 4);
    float s[kTiles * 4];
#pragma unroll
    for (int e = 0; e < kTiles * 4; ++e) s[e] = 0.0f;
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {  // k16 slice k: atom column k / 4, 32 bytes per slice within it
      const uint32_t in_atom = (k % 4) * 32;
      sm90::wgmma_m64n32k16_ss(s, q_desc + (((k / 4) * kAttentionPrefillMaxPairs * 128 + in_atom) >> 4),
                               kd + (((k / 4) * kCol + in_atom) >> 4));
    }
    sm90::wgmma_commit();
    if (t > 0) {
      issue_pv(t - 1);
    } else {
      // An empty group, so every step waits for S with wait<1>: with the
      // copies between the commits and the wait, a wait whose group count
      // depended on the step made ptxas serialize the wgmmas (C7514).
      sm90::wgmma_commit();
    }
    // The step's metadata share and its copies (K of step t + 1 into the
    // K tile step t - 1 read, V of step t into the V tile step t - 2's PV
    // read), issued while the tensor cores run S and the PV: both tiles
    // were freed by waits before the barrier.
    pf_next_chunk<kWgNT>(pa, tl, t, meta, slots_s, masks_s);
    if (t + 1 < steps)
      wg_issue<D>(a.k_cache, row_bytes, b.g, pf_step_slots<kWgNT>(slots_s, t + 1), k_ring + ((t + 1) & 1) * L::kTileBytes);
    wg_issue<D>(a.v_cache, row_bytes, b.g, pf_step_slots<kWgNT>(slots_s, t), v_ring + (t & 1) * L::kTileBytes);
    cp_async_commit();
    const PfMasks<kTiles> mk = pf_load_masks<kWgNT>(masks_s, t);
    sm90::wgmma_wait<1>();  // S (committed first) is done; the PV may still run
    sm90::fence_operands(s);
    float s4[kTiles][4];
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[n][e] = s[4 * n + e] * a.k_scale;
    float r0[2 * kTiles], r1[2 * kTiles];
    const PfAlpha al = pf_softmax(a, s4, mk, tr0, tr1, r0, r1, m0, m1, l0, l1);
    sm90::wgmma_wait<0>();  // step t - 1's PV has added into O
    sm90::fence_operands(*reinterpret_cast<float(*)[kDimTiles * 4]>(&acc));
    if (t > 0) pf_rescale<D>(acc, al);
#pragma unroll
    for (int j = 0; j < kSlices; ++j) {  // the A layout of slice j: n8 tiles 2j and 2j + 1 of S
      p_prev[j][0] = p_bf16x2(r0[4 * j], r0[4 * j + 1]);
      p_prev[j][1] = p_bf16x2(r1[4 * j], r1[4 * j + 1]);
      p_prev[j][2] = p_bf16x2(r0[4 * j + 2], r0[4 * j + 3]);
      p_prev[j][3] = p_bf16x2(r1[4 * j + 2], r1[4 * j + 3]);
    }
  }
  if (steps > 0) {
    cp_async_wait<0>();  // V of the last step
    sm90::fence_proxy_async_smem();
    __syncthreads();
    sm90::wgmma_fence();
    issue_pv(steps - 1);
    sm90::wgmma_wait<0>();
  }
  cp_async_wait<0>();
  pf_store<D>(pa, tl, b, acc, l0, l1, smem + L::kK, smem + L::kQ);
#else
  __trap();  // launched only where this pass had wgmma (wgmma_prefill_supported)
#endif
}

template <class Kernel>
void launch_prefill_kernel(Kernel kernel, const PrefillArgs& pa, int64_t num_tiles, int shared_bytes,
                           hipStream_t stream) {
  resident_blocks(reinterpret_cast<const void*>(kernel), kPfBlock, shared_bytes);
  LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(num_tiles), static_cast<unsigned>(pa.k.kv_heads * pa.k.head_chunks));
  shape.block = dim3(kPfBlock);
  shape.shared_bytes = shared_bytes;
  launch_dependent(kernel, shape, stream, pa);
}

template <int D>
void launch_prefill_typed(const PrefillArgs& pa, int64_t num_tiles, bool wgmma, hipStream_t stream) {
  if (wgmma) return launch_prefill_kernel(wgmma_prefill_kernel<D>, pa, num_tiles, WgSmem<D>::kBytes, stream);
  launch_prefill_kernel(mma_prefill_kernel<D>, pa, num_tiles, PfSmem<D>::kBytes, stream);
}

}  // namespace

bool mma_prefill_params_supported(int head_dim, bool round_p, bool fp8) {
  return !fp8 && (head_dim == 64 || head_dim == 128 || head_dim == 256) && round_p;
}

bool mma_prefill_supported(const KernelArgs& a, int head_dim, bool fp8) {
  const bool slots_fit = a.num_pages * static_cast<int64_t>(a.page_size) <= INT32_MAX;
  return mma_prefill_params_supported(head_dim, a.round_p, fp8) && slots_fit &&
         is_aligned(a.q, 16) && is_aligned(a.k_cache, 16) && is_aligned(a.v_cache, 16) && is_aligned(a.gate, 16) &&
         is_aligned(a.attn, 16) && is_aligned(a.gated, 16);  // pf_store's vectors
}

namespace {

// The Hopper kernel exists in builds with sm_90a code and runs on compute
// capability 9.0 devices.
bool hopper_prefill_runs_here() {
#if defined(QSA_CUDA_SM90A)
  const DeviceLimits& d = device_limits();
  return d.major == 9 && d.minor == 0;
#else
  return false;
#endif
}

}  // namespace

bool wgmma_prefill_supported(const KernelArgs& a, int head_dim, bool fp8) {
  return hopper_prefill_runs_here() && mma_prefill_supported(a, head_dim, fp8);
}

bool wgmma_prefill_params_supported(int head_dim, bool round_p, bool fp8) {
  return hopper_prefill_runs_here() && mma_prefill_params_supported(head_dim, round_p, fp8);
}

void launch_mma_prefill(const PrefillArgs& pa, int64_t num_tiles, int head_dim, bool wgmma, hipStream_t stream) {
  switch (head_dim) {
    case 64: return launch_prefill_typed<64>(pa, num_tiles, wgmma, stream);
    case 128: return launch_prefill_typed<128>(pa, num_tiles, wgmma, stream);
    case 256: return launch_prefill_typed<256>(pa, num_tiles, wgmma, stream);
    default: throw ConfigError("gpu attention: head_dim " + std::to_string(head_dim) + " has no tensor-core kernel");
  }
}

#else  // AMD: the portable kernel only

bool mma_prefill_params_supported(int, bool, bool) { return false; }
bool mma_prefill_supported(const KernelArgs&, int, bool) { return false; }
bool wgmma_prefill_supported(const KernelArgs&, int, bool) { return false; }
bool wgmma_prefill_params_supported(int, bool, bool) { return false; }
void launch_mma_prefill(const PrefillArgs&, int64_t, int, bool, hipStream_t) {
  throw ConfigError("gpu attention: the tensor-core prefill kernel exists only in CUDA builds");
}

#endif

}  // namespace qsa::gpu::attn
