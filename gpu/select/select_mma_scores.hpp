// Phase 1 with tensor cores: the fp32 scores of bf16 indexer codes on
// NVIDIA (sm_80 and later), for every path of that build (the split decode
// scorer, the fused short-row kernel and the prefill scorer). Device code,
// included by select.hip only, and only inside `#if defined(QSA_GPU_CUDA)`.
//
// Why: the fma-chain scorer (select_scores.hpp) spends about 800
// instructions per key (512 fmas, the widenings, the shared-memory reads of
// q). A bf16 m16n8k16 mma takes 16 keys x 8 heads x 16 dims in one
// instruction, so a wave scores 32 keys of d_I = 128 with 16 key loads and
// 16 mmas, without staging. Measured on an H200 (docs/performance.md,
// eleventh pass): the prefill scorer, whose rows share a tile's keys through
// L1, 7x faster; the decode scorer 135 us at 64 rows x 128K, 85% of DRAM,
// once its launcher asked for the largest L1 carveout (twelfth pass: with
// the largest shared-memory one it had ~23 KB of L1 and took 153 us).
//
// The formula (the same for every path, so their bits agree):
//
//   score(b) = s · Σ_h ReLU(acc_h(b)),  heads added in increasing h from 0.0f,
//
// acc_h(b) being the fp32 accumulator of one m16n8k16 chain per group of 8
// heads over the k-steps 0, 1, ..., 2 · ceil(d_I / 32) - 1 (dims past d_I,
// and heads past H_I, are zero). k-step 2c + s of chunk c covers dims
// 32c + 8tq + 4s + {0, 1, 2, 3} for tq = 0..3, in the mma's k positions
// {2tq, 2tq + 1, 2tq + 8, 2tq + 9}: a permutation of the dims (the dot
// product does not care, the mma's rounding does, so it is fixed) that lets
// lane (gq, tq) read its whole share of a key row, 8 consecutive codes, as
// one 16-byte load, 64 contiguous bytes per key row and load instruction.
// An mma's element (m, n) depends only on row m of A, column n of B and its
// accumulator, so a key's score does not depend on the keys or rows it
// shares an instruction with. The bits differ from the fma chain's (AMD
// builds keep that one); tests/tolerances.hpp bounds both against the fp64
// reference.
//
// Wave tile: 32 consecutive blocks b0 + m, m < 32, two m16 tiles: lane
// (gq, tq) loads keys gq + 8u (u < 4); after the epilogue lane tq = 0 of
// each quad holds their scores. The loads use L1 (ld.global.cg measured 46%
// slower at 64 rows: the two halves of each 128-byte line come from two
// instructions).
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/common/mma_sm80.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_scores.hpp"

namespace qsa::gpu::select_detail {

inline constexpr int kMmaTileKeys = 32;   // blocks per wave tile
inline constexpr int kMmaChunkDims = 32;  // dims per chunk: 4 lanes x 8 codes, two k16 steps
inline constexpr int kMmaHeads = 8;       // heads per mma (its n)
inline constexpr int kMmaMaxChunks = 4;   // chunks a lane keeps in registers (d_I <= 128)
inline constexpr int kMmaWaves = 8;       // waves per block of the decode and prefill scorers
inline constexpr int kMmaScoreThreads = kMmaWaves * 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ inline int mma_chunks(int dim) { return (dim + kMmaChunkDims - 1) / kMmaChunkDims; }

// Whether the query fragments and one tile's keys fit in registers (one head
// group, d_I <= 128: the model's 4 x 128 among them). Other shapes loop over
// head groups and batches of chunks with the same mma order, so the choice
// does not change a bit; it is made per launch from (H_I, d_I).
__host__ __device__ inline bool mma_small(int heads, int dim) {
  return heads <= kMmaHeads && dim <= kMmaMaxChunks * kMmaChunkDims;
}

// The lane in the wave. wave.hpp's lane_id() divides by warpSize, which nvcc
// does not fold to 32 (docs/performance.md, tenth pass); this file is
// NVIDIA-only, where a wave is 32 lanes.
__device__ inline int mma_lane() { return static_cast<int>(threadIdx.x) & 31; }

// Codes p[j, j + 8) as a 16-byte fragment, zero past `dim`. kVector: p + j
// is 16-byte aligned and dim % 8 == 0 (the 8 codes are all in or all out).
template <bool kVector>
__device__ inline uint4 mma_codes8(const uint16_t* p, int j, int dim) {
  if (j >= dim) return make_uint4(0u, 0u, 0u, 0u);
  if constexpr (kVector) {
    return *reinterpret_cast<const uint4*>(p + j);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const uint32_t lo = j + 2 * e < dim ? p[j + 2 * e] : 0u;
      const uint32_t hi = j + 2 * e + 1 < dim ? p[j + 2 * e + 1] : 0u;
      w[e] = lo | (hi << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// kWhole (kVector and d_I % 32 == 0): every chunk is whole, so no bound test.
template <bool kVector, bool kWhole>
__device__ inline uint4 mma_key_codes8(const uint16_t* p, int j, int dim) {
  if constexpr (kWhole) {
    return *reinterpret_cast<const uint4*>(p + j);
  } else {
    return mma_codes8<kVector>(p, j, dim);
  }
}

// This lane's query fragments of head h0 + gq (zero past H_I) for chunks
// c0 .. c0 + kMmaMaxChunks - 1: chunk c0 + c at qf[c] (zero past d_I).
template <bool kVector>
__device__ inline void mma_query_frags(const uint16_t* q, int h0, int c0, int heads, int dim,
                                       uint4 (&qf)[kMmaMaxChunks]) {
  const int gq = mma_lane() >> 2;
  const int piece = 8 * (mma_lane() & 3);
#pragma unroll
  for (int c = 0; c < kMmaMaxChunks; ++c)
    qf[c] = h0 + gq < heads ? mma_codes8<kVector>(q + (h0 + gq) * dim, kMmaChunkDims * (c0 + c) + piece, dim)
                            : make_uint4(0u, 0u, 0u, 0u);
}

// The key rows of one wave tile as lane (gq, tq) needs them: row[u] is key
// gq + 8u of the tile, always a readable row (an unmapped block or one past
// V reads the cache's first row: its result is dropped, and an mma row does
// not touch the other rows' results); bit u of `mapped` says whether it is
// the block's own.
struct MmaTileKeys {
  const uint16_t* row[4];
  uint32_t mapped;
};

// From each lane's own cache row (-1: none; lane l holds block b0 + l) to
// the quads' rows. Most tiles are 32 consecutive rows of one mapped page:
// then lane 0's row gives all of them (one shuffle and a vote instead of
// one shuffle per key).
__device__ inline MmaTileKeys mma_tile_keys(const uint16_t* keys, int dim, int64_t own) {
  const int lane = mma_lane();
  const int gq = lane >> 2;
  MmaTileKeys k;
  const long long first = __shfl_sync(kFullMask, static_cast<long long>(own), 0);
  if (__all_sync(kFullMask, own >= 0 && own == first + lane)) {  // uniform
    k.mapped = 0xFu;
#pragma unroll
    for (int u = 0; u < 4; ++u) k.row[u] = keys + (first + gq + 8 * u) * dim;
    return k;
  }
  k.mapped = 0u;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const long long r = __shfl_sync(kFullMask, static_cast<long long>(own), gq + 8 * u);
    k.row[u] = keys + (r >= 0 ? r : 0) * dim;
    k.mapped |= r >= 0 ? 1u << u : 0u;
  }
  return k;
}

// A block's table entry as loaded (phys, -1 when the block is past V or its
// page past the table) and its row within the page; mma_resolve turns it
// into the cache row. Split so that the load can be issued a tile ahead and
// its value first used a tile later (a warp stalls at the first instruction
// that needs a pending load, wherever it sits).
struct MmaPendingRow {
  int32_t phys;
  int32_t off;
};

__device__ inline int64_t mma_resolve(const MmaPendingRow& p, const PagedKeys& g) {
  if (p.phys < 0 || p.phys >= g.num_pages) return -1;
  return int64_t{p.phys} * g.rows_per_page + p.off;
}

// One lane's walk over its blocks b = b0 + lane, b0 advancing by `step`:
// page and offset kept by additions (no division per tile), and its table
// entry fetched.
struct MmaBlockWalk {
  int64_t b, page, off, dpage, doff;
  __device__ MmaBlockWalk(int64_t first, int64_t step, int rows_per_page)
      : b(first + mma_lane()),
        page(b / rows_per_page),
        off(b % rows_per_page),
        dpage(step / rows_per_page),
        doff(step % rows_per_page) {}
  __device__ void advance(int64_t step, int rows_per_page) {
    b += step;
    page += dpage;
    off += doff;
    if (off >= rows_per_page) {
      off -= rows_per_page;
      ++page;
    }
  }
  // The block's table entry (mma_resolve gives paged_row's answer: -1 past
  // `limit` or on an unmapped page).
  __device__ MmaPendingRow fetch(const PagedKeys& g, int32_t limit) const {
    return {b < limit && page < g.max_pages ? g.table_row[page] : -1, static_cast<int32_t>(off)};
  }
};

// max(0, x) keeping NaN, as relu_keep_nan (the same bits, -0 to +0 included)
// in two instructions.
__device__ inline float mma_relu(float x) { return !(x <= 0.0f) ? x : 0.0f; }

// sum[u] += ReLU of the head group's accumulators, heads in increasing
// order: acc[m][0..1] = (key gq + 16m, heads 2tq, 2tq + 1), acc[m][2..3] the
// same for key gq + 8 + 16m, so head h sits h / 2 lanes further in the quad.
// Lane tq = 0 ends with the quad's sums (the other lanes' are not used).
__device__ inline void mma_add_heads(const float (&acc)[2][4], int nh, float (&sum)[4]) {
  float r[2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int i = 0; i < 4; ++i) r[m][i] = mma_relu(acc[m][i]);
#pragma unroll
  for (int h = 0; h < kMmaHeads; ++h) {
    if (h >= nh) break;  // uniform
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      float a = r[m][h & 1];
      float b = r[m][2 + (h & 1)];
      if (h >= 2) {
        a = __shfl_down_sync(kFullMask, a, h >> 1);
        b = __shfl_down_sync(kFullMask, b, h >> 1);
      }
      sum[2 * m] += a;
      sum[2 * m + 1] += b;
    }
  }
}

// The two m16 tiles' mmas of chunk c: k-step 2c from codes 0..3 of every
// piece, then 2c + 1 from codes 4..7.
__device__ inline void mma_chunk(const uint4 (&kv)[4], const uint4& qv, float (&acc)[2][4]) {
#pragma unroll
  for (int m = 0; m < 2; ++m) {
    const uint4& lo = kv[2 * m];
    const uint4& hi = kv[2 * m + 1];
    const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y};
    sm80::mma_bf16(acc[m], a0, qv.x, qv.y);
    const uint32_t a1[4] = {lo.z, hi.z, lo.w, hi.w};
    sm80::mma_bf16(acc[m], a1, qv.z, qv.w);
  }
}

// The tile's key fragments when mma_small(H_I, d_I): kv[c][u] = chunk c of
// key gq + 8u, every load issued before any is used.
template <bool kVector, bool kWhole>
__device__ inline void mma_load_keys(const MmaTileKeys& k, int dim, uint4 (&kv)[kMmaMaxChunks][4]) {
  const int piece = 8 * (mma_lane() & 3);
  const int chunks = mma_chunks(dim);
#pragma unroll
  for (int c = 0; c < kMmaMaxChunks; ++c)
#pragma unroll
    for (int u = 0; u < 4; ++u)
      kv[c][u] = c < chunks ? mma_key_codes8<kVector, kWhole>(k.row[u], kMmaChunkDims * c + piece, dim)
                            : make_uint4(0u, 0u, 0u, 0u);
}

// out[u] = score of the tile's key gq + 8u from its fragments kv and the
// query fragments qf (mma_query_frags at h0 = c0 = 0), when mma_small(H_I, d_I).
// Valid in lane tq = 0 of each quad.
__device__ inline void mma_scores_small(const uint4 (&qf)[kMmaMaxChunks], const uint4 (&kv)[kMmaMaxChunks][4],
                                        int heads, int dim, float scale, float (&out)[4]) {
  const int chunks = mma_chunks(dim);
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int c = 0; c < kMmaMaxChunks; ++c)
    if (c < chunks) mma_chunk(kv[c], qf[c], acc);  // uniform
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma_add_heads(acc, heads, sum);
#pragma unroll
  for (int u = 0; u < 4; ++u) out[u] = sum[u] * scale;
}

template <bool kVector, bool kWhole>
__device__ void mma_tile_scores_small(const uint4 (&qf)[kMmaMaxChunks], const MmaTileKeys& k, int heads, int dim,
                                      float scale, float (&out)[4]) {
  uint4 kv[kMmaMaxChunks][4];
  mma_load_keys<kVector, kWhole>(k, dim, kv);
  mma_scores_small(qf, kv, heads, dim, scale, out);
}

// The same for any (H_I, d_I): head groups of 8, chunks in batches of
// kMmaMaxChunks, the query fragments read per batch (q the row's codes).
template <bool kVector>
__device__ void mma_tile_scores_any(const uint16_t* q, const MmaTileKeys& k, int heads, int dim, float scale,
                                    float (&out)[4]) {
  const int piece = 8 * (mma_lane() & 3);
  const int chunks = mma_chunks(dim);
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int h0 = 0; h0 < heads; h0 += kMmaHeads) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    for (int c0 = 0; c0 < chunks; c0 += kMmaMaxChunks) {
      uint4 kv[kMmaMaxChunks][4];
#pragma unroll
      for (int c = 0; c < kMmaMaxChunks; ++c)
#pragma unroll
        for (int u = 0; u < 4; ++u)
          kv[c][u] = c0 + c < chunks ? mma_codes8<kVector>(k.row[u], kMmaChunkDims * (c0 + c) + piece, dim)
                                     : make_uint4(0u, 0u, 0u, 0u);
      uint4 qf[kMmaMaxChunks];
      mma_query_frags<kVector>(q, h0, c0, heads, dim, qf);
#pragma unroll
      for (int c = 0; c < kMmaMaxChunks; ++c) {
        if (c0 + c >= chunks) break;  // uniform
        mma_chunk(kv[c], qf[c], acc);
      }
    }
    mma_add_heads(acc, heads - h0 < kMmaHeads ? heads - h0 : kMmaHeads, sum);
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) out[u] = sum[u] * scale;
}

// One row's query as the tile scorers take it: with kSmall (mma_small(H_I,
// d_I), which the launcher checks) its fragments in registers, else its
// codes, read per batch. kSmall is a template parameter so that a kernel
// holds one of the two paths' registers, not both.
template <bool kSmall>
struct MmaQuery;

template <>
struct MmaQuery<true> {
  uint4 qf[kMmaMaxChunks];
};

template <>
struct MmaQuery<false> {
  const uint16_t* q;  // [H_I, d_I] codes
};

template <bool kSmall, bool kVector>
__device__ inline MmaQuery<kSmall> mma_query(const uint16_t* q, int heads, int dim) {
  MmaQuery<kSmall> r;
  if constexpr (kSmall) {
    mma_query_frags<kVector>(q, 0, 0, heads, dim, r.qf);
  } else {
    r.q = q;
  }
  return r;
}

template <bool kSmall, bool kVector, bool kWhole>
__device__ inline void mma_tile_scores(const MmaQuery<kSmall>& q, const MmaTileKeys& k, int heads, int dim,
                                       float scale, float (&out)[4]) {
  if constexpr (kSmall) {
    mma_tile_scores_small<kVector, kWhole>(q.qf, k, heads, dim, scale, out);
  } else {
    mma_tile_scores_any<kVector>(q.q, k, heads, dim, scale, out);
  }
}

// A score into the scratch with an L2 evict-last hint (sm_80+): the
// staged scorer's stores (see mma_score_tiles_staged). The policy's asm is
// not volatile, so the compiler may compute it once per wave.
__device__ inline void mma_store_keep_l2(float* p, float v) {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;\n" ::"l"(p), "f"(v), "l"(policy) : "memory");
}

// Writes the tile's scores s of blocks below `visible` to scores[b]: NaN on
// an unmapped page (bit u of `mapped` clear: MmaTileKeys), nothing past V. Lane tq = 0 of each quad stores its four.
// kKeepInL2: with mma_store_keep_l2's hint (the staged decode scorer).
// With `hist` (the split decode scorer's block histogram in shared memory:
// 16-bit counters, bin j in half j % 2 of word j / 2) each stored score
// also adds one to the bin of its top 12 key bits, the top-k's first radix
// digit (hist_top_keys), by an atomic whose result is not used (the wave
// does not wait for it). The launcher keeps a block's keys below 2^16.
template <bool kKeepInL2 = false>
__device__ inline void mma_store_tile(uint32_t mapped, const float (&s)[4], int64_t b0, int32_t visible,
                                      float* scores, uint32_t* hist = nullptr) {
  const int lane = mma_lane();
  if ((lane & 3) != 0) return;
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int64_t b = b0 + (lane >> 2) + 8 * u;
    if (b < visible) {
      const float v = (mapped >> u & 1u) != 0u ? s[u] : float_from_bits(kQuietNanBits);
      if constexpr (kKeepInL2) {
        mma_store_keep_l2(scores + b, v);
      } else {
        scores[b] = v;
      }
      if (hist != nullptr) {
        // score_bin(v), written out: through the call nvcc schedules this kernel differently
        const uint32_t bin = orderable_score_bits(v) >> (32 - kScoreBinBits);
        atomicAdd(hist + (bin >> 1), 1u << ((bin & 1u) << 4));
      }
    }
  }
}

// ---- the staged decode scorer (d_I = 128) --------------------------------
//
// Why (docs/performance.md, fifteenth pass): at 64 rows x 128K the register
// scorer streamed its 512 MiB of keys at 4.0 TB/s, where a probe that only
// reads the same tiles reached 4.4 TB/s (123 us against 136). The probe lost
// the same 11 us as soon as it also wrote 4 bytes per key: the 8 MiB of
// scores, written back to DRAM in the middle of the key stream, cost 9% of
// the time for 1.6% of the bytes. Stored with an L2 evict-last hint they
// stay in L2 (where the top-k reads them next) and the probe was back at
// 123 us. The hint only paid off in the real kernel once its key loads
// bypassed L1 (with L1 loads it was slower at 256 rows): here each wave
// copies a tile's keys into its stage in shared memory with cp.async, each
// instruction two whole key rows (512 contiguous bytes), and reads its
// fragments from there: the same codes in the same registers, so the same
// mmas and the same bits as the register scorer.
//
// The stage: kMmaTileKeys rows of 128 codes (256 bytes); 16-byte chunk j of
// row r sits at chunk j ^ 4 (r & 1) of its row, so that each quarter-wave of
// a fragment read (rows 2p and 2p + 1, four chunks each) covers the 32 banks
// once.
inline constexpr int kMmaStagedDim = kMmaMaxChunks * kMmaChunkDims;  // 128: the only d_I staged
inline constexpr int kMmaStageChunks = kMmaStagedDim / 8;             // 16-byte chunks per key row
inline constexpr int kMmaStageBytes = kMmaTileKeys * kMmaStagedDim * 2;  // 8 KiB per wave

__device__ inline uint32_t mma_stage_offset(int r, int j) {
  return static_cast<uint32_t>(r * kMmaStagedDim * 2 + 16 * (j ^ ((r & 1) << 2)));
}

// Issues the copies of one tile into the wave's stage (one commit group)
// and returns the tile's `mapped` bits as mma_tile_keys would (bit u: key gq
// + 8u of this lane's quad is its block's own). `own`: this lane's cache row
// (-1: none; lane l holds block b0 + l); an unmapped or absent block copies
// the cache's first row, whose score is dropped. Copy m of lane l is chunk l
// % 16 of row 2m + l / 16.
__device__ inline uint32_t mma_stage_copy(uint32_t stage, const uint16_t* keys, int64_t own) {
  const int lane = mma_lane();
  const int j = lane & (kMmaStageChunks - 1);
  const int half = lane / kMmaStageChunks;
  const long long first = __shfl_sync(kFullMask, static_cast<long long>(own), 0);
  uint32_t mapped = 0xFu;
  if (__all_sync(kFullMask, own >= 0 && own == first + lane)) {  // uniform: one page's consecutive rows
    const uint16_t* src = keys + (first + half) * kMmaStagedDim + 8 * j;
#pragma unroll
    for (int m = 0; m < kMmaTileKeys / 2; ++m)
      sm80::cp_async16(stage + mma_stage_offset(2 * m + half, j), src + 2 * m * kMmaStagedDim, true);
  } else {
#pragma unroll
    for (int m = 0; m < kMmaTileKeys / 2; ++m) {
      const long long r = __shfl_sync(kFullMask, static_cast<long long>(own), 2 * m + half);
      sm80::cp_async16(stage + mma_stage_offset(2 * m + half, j), keys + (r >= 0 ? r : 0) * kMmaStagedDim + 8 * j,
                       true);
    }
    const int gq = lane >> 2;
    mapped = 0u;
#pragma unroll
    for (int u = 0; u < 4; ++u) mapped |= __shfl_sync(kFullMask, own, gq + 8 * u) >= 0 ? 1u << u : 0u;
  }
  sm80::cp_async_commit();
  return mapped;
}

// Chunk c of the tile's fragments from the stage, as mma_load_keys gives
// them: kv[u] = codes 32c + 8tq .. + 8 of key gq + 8u.
__device__ inline void mma_stage_load_chunk(const unsigned char* stage, int c, uint4 (&kv)[4]) {
  const int gq = mma_lane() >> 2;
  const int tq = mma_lane() & 3;
#pragma unroll
  for (int u = 0; u < 4; ++u) kv[u] = *reinterpret_cast<const uint4*>(stage + mma_stage_offset(gq + 8 * u, 4 * c + tq));
}

// mma_score_tiles for d_I = 128 with H_I <= 8 (mma_small, kWhole), the keys
// through `stage` (this wave's kMmaStageBytes of shared memory), the scores
// stored with the evict-last hint. Only one chunk's fragments are in
// registers at a time; the next tile's copies are issued once the stage has
// been read, so they are in flight during the epilogue, the stores and the
// next table lookup.
__device__ void mma_score_tiles_staged(const MmaQuery<true>& q, const uint16_t* keys, const PagedKeys& g, int heads,
                                       float scale, int32_t visible, int64_t first, int64_t step, float* scores,
                                       unsigned char* stage, uint32_t* hist) {
  if (first >= visible) return;
  const uint32_t stage_addr = sm80::smem_addr(stage);
  MmaBlockWalk walk(first, step, g.rows_per_page);
  uint32_t mapped_next = mma_stage_copy(stage_addr, keys, mma_resolve(walk.fetch(g, visible), g));
  walk.advance(step, g.rows_per_page);
  MmaPendingRow next = walk.fetch(g, visible);  // the next tile's table load
  for (int64_t b0 = first; b0 < visible; b0 += step) {  // uniform over the wave
    sm80::cp_async_wait<0>();
    __syncwarp();  // every lane's copies have landed
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int c = 0; c < kMmaMaxChunks; ++c) {  // one chunk's fragments live at a time
      uint4 kv[4];
      mma_stage_load_chunk(stage, c, kv);
      mma_chunk(kv, q.qf[c], acc);
    }
    __syncwarp();  // every lane has read the stage before the next copies overwrite it
    const uint32_t mapped = mapped_next;
    if (b0 + step < visible) {  // uniform: the next tile's copies
      mapped_next = mma_stage_copy(stage_addr, keys, mma_resolve(next, g));
      walk.advance(step, g.rows_per_page);
      next = walk.fetch(g, visible);  // used one tile later
    }
    // mma_score_tiles' epilogue, written out in both: through a shared
    // helper nvcc scheduled the register scorer (and the fused kernel)
    // differently.
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_add_heads(acc, heads, sum);
    float s[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] = sum[u] * scale;
    mma_store_tile<true>(mapped, s, b0, visible, scores, hist);
  }
}

// Scores this wave's tiles b0 = first, first + step, ... below `visible` of
// one row (q its query, g its paged keys). Every lane of the wave, converged.
// With kSmall the loop is pipelined: the next tile's key loads are issued
// right after this tile's mmas, so they are in flight during its epilogue,
// its stores and the next table lookup (each wave keeps one tile's loads
// in flight almost all the time, not only between its lookup and its mmas).
// `hist`: as mma_store_tile.
template <bool kSmall, bool kVector, bool kWhole>
__device__ void mma_score_tiles(const MmaQuery<kSmall>& q, const uint16_t* keys, const PagedKeys& g, int heads,
                                float scale, int32_t visible, int64_t first, int64_t step, float* scores,
                                uint32_t* hist = nullptr) {
  if (first >= visible) return;
  MmaBlockWalk walk(first, step, g.rows_per_page);
  MmaTileKeys k = mma_tile_keys(keys, g.dim, mma_resolve(walk.fetch(g, visible), g));
  walk.advance(step, g.rows_per_page);
  MmaPendingRow next = walk.fetch(g, visible);  // the next tile's table load
  if constexpr (kSmall) {  // mma_scores_small's steps, with the next tile's loads between its mmas and its epilogue
    uint4 kv[kMmaMaxChunks][4];
    mma_load_keys<kVector, kWhole>(k, g.dim, kv);
    for (int64_t b0 = first; b0 < visible; b0 += step) {  // uniform over the wave
      const int chunks = mma_chunks(g.dim);
      float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int c = 0; c < kMmaMaxChunks; ++c)
        if (c < chunks) mma_chunk(kv[c], q.qf[c], acc);  // uniform
      const uint32_t mapped = k.mapped;
      if (b0 + step < visible) {  // uniform: the next tile's loads
        k = mma_tile_keys(keys, g.dim, mma_resolve(next, g));
        mma_load_keys<kVector, kWhole>(k, g.dim, kv);
        walk.advance(step, g.rows_per_page);
        next = walk.fetch(g, visible);  // used one tile later
      }
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      mma_add_heads(acc, heads, sum);
      float s[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) s[u] = sum[u] * scale;
      mma_store_tile(mapped, s, b0, visible, scores, hist);
    }
  } else {
    for (int64_t b0 = first; b0 < visible; b0 += step) {  // uniform over the wave
      float s[4];
      mma_tile_scores<kSmall, kVector, kWhole>(q, k, heads, g.dim, scale, s);
      mma_store_tile(k.mapped, s, b0, visible, scores, hist);
      if (b0 + step < visible) {  // uniform
        k = mma_tile_keys(keys, g.dim, mma_resolve(next, g));
        walk.advance(step, g.rows_per_page);
        next = walk.fetch(g, visible);
      }
    }
  }
}

}  // namespace qsa::gpu::select_detail
