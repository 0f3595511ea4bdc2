// The select kernels and their launcher. The phases live in
// select_staged_scores.hpp (decode scores, keys staged through shared
// memory), select_decode_scores.hpp (decode scores read directly, a chunk of
// blocks of one row), select_prefill_scores.hpp (tiled prefill scores),
// select_scores.hpp (the fma-chain formula those share),
// select_mma_scores.hpp (bf16 on NVIDIA: every path's scores with tensor
// cores) and select_topk.hpp (radix select + bitonic sort); this file ties
// them into the kernels, picks the decode path's kernels, their shapes and
// the key reader, and dispatches on the indexer dtype.
#include "gpu/select/select.hpp"

#include <cstdint>

#include "gpu/common/dependent_launch.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/select/select_args.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_decode_scores.hpp"
#include "gpu/select/select_prefill_scores.hpp"
#include "gpu/select/select_scores.hpp"
#include "gpu/select/select_staged_scores.hpp"
#include "gpu/select/select_topk.hpp"

#if defined(QSA_GPU_CUDA)
#include "gpu/select/select_mma_scores.hpp"
#endif

namespace qsa::gpu {

namespace select_detail {

namespace {

inline constexpr int kPrefillScoreThreads = 256;
static_assert(kSelectDecodeChunk == kDecodeScoreThreads * kDecodeKeysPerThread, "one chunk per scoring block");
static_assert(kMaxWinners == kSelectMaxBlocksBudget, "the sort buffer holds K_B keys");
static_assert(kRadixBins == kSelectRowHistBins && kScoreBinBits == kRadixBits,
              "a row histogram's bins are the first radix pass's");
static_assert(kRadixBins * sizeof(uint32_t) >= kSelectMaxQueryValues * sizeof(float),
              "the fused decode kernel keeps the query row in TopKShared::hist");
static_assert((kFp8TableFloats + kSelectMaxQueryValues) * sizeof(float) <= 48 * 1024,
              "the scoring kernel's table and query row fit the default dynamic shared memory");

// Threads of the fused decode kernel, which scores a short row before its
// top-k in the same block.
inline constexpr int kFusedThreads = 512;

// Whether this build scores kKind's codes with tensor cores
// (select_mma_scores.hpp: bf16 on NVIDIA) rather than with the fma chains of
// select_scores.hpp. Every path of a build takes the same branch, so their
// bits agree. For these kernels kVector means 16-byte reads of keys and
// query alike (d_I % 8 == 0, both pointers 16-byte aligned).
#if defined(QSA_GPU_CUDA)
template <CodeKind kKind>
inline constexpr bool kMmaScores = kKind == CodeKind::kBf16;
#else
template <CodeKind kKind>
inline constexpr bool kMmaScores = false;
#endif

// Writes ids[i], scores[i] for i < K_B: the k sorted winners, then -1 / -inf.
template <int kThreads>
__device__ void write_row(const TopKShared& sh, int k, int blocks_budget, const float* scores,
                          int32_t visible, int32_t* ids_out, float* scores_out) {
  for (int i = static_cast<int>(threadIdx.x); i < blocks_budget; i += kThreads) {
    if (i < k) {
      const uint32_t id = select_key_id(sh.keys[i]);
      ids_out[i] = static_cast<int32_t>(id);
      // id < visible always; the guard keeps a broken sort from reading past the row.
      scores_out[i] = id < static_cast<uint32_t>(visible) ? scores[id] : float_from_bits(kQuietNanBits);
    } else {
      ids_out[i] = -1;
      scores_out[i] = float_from_bits(0xFF800000u);  // -inf
    }
  }
}

// Phase 2 of row t over its scores (the scratch row, complete for b < visible,
// visible >= 1): the one top-k every path runs.
// `bins`: the row's histogram when `hist` (select_topk_kernel), else unused.
template <int kThreads>
__device__ void topk_phase(const SelectArgs& a, int64_t t, int32_t visible, TopKShared& sh, bool hist = false,
                           const uint32_t (&bins)[kBinsPerThread<kThreads>] = {}) {
  const float* scores = a.score_scratch + t * a.score_stride;
  const int k = visible < a.blocks_budget ? visible : a.blocks_budget;
  select_top_keys<kThreads>(scores, visible, k, sh, hist, bins);
  write_row<kThreads>(sh, k, a.blocks_budget, scores, visible, a.block_ids + t * a.blocks_budget,
                      a.block_scores + t * a.blocks_budget);
}

// The row's outputs when it sees no block (padding rows included).
template <int kThreads>
__device__ void write_empty_row(const SelectArgs& a, int64_t t, const TopKShared& sh) {
  write_row<kThreads>(sh, 0, a.blocks_budget, nullptr, 0, a.block_ids + t * a.blocks_budget,
                      a.block_scores + t * a.blocks_budget);
}

// The paged keys of row t's request (t a real row).
__device__ PagedKeys request_keys(const SelectArgs& a, int64_t t) {
  const int32_t req = a.token_to_req[t];
  return {a.block_table_c + int64_t{req} * a.max_pages, a.max_pages, a.num_pages, a.rows_per_page, a.dim};
}

// Decode path, rows of at most kSelectDecodeChunk blocks: both phases of one
// row per block (see launch_decode). fp8 keys are decoded by arithmetic: the
// table of the scoring kernel would not fit beside TopKShared, and these
// rows are short.
template <CodeKind kKind, bool kVector, class Code, bool kSmall>
__global__ void __launch_bounds__(kFusedThreads)
    select_decode_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a) {
  __shared__ TopKShared sh;
  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  if (visible == 0) {  // uniform over the block
    write_empty_row<kFusedThreads>(a, t, sh);
    return;
  }
  // Phase 1. The scratch row is written and re-read by this block only:
  // __syncthreads makes the global writes visible to its threads.
  const PagedKeys keys = request_keys(a, t);
  float* scores = a.score_scratch + t * a.score_stride;
  const int query_values = a.heads * a.dim;
#if defined(QSA_GPU_CUDA)
  if constexpr (kMmaScores<kKind>) {
    const auto q = mma_query<kSmall, kVector>(index_q + t * query_values, a.heads, a.dim);
    mma_score_tiles<kSmall, kVector, false>(q, compressed_keys, keys, a.heads, a.scale, visible,
                                    int64_t{wave_id()} * kMmaTileKeys, kFusedThreads, scores);
    __syncthreads();
    topk_phase<kFusedThreads>(a, t, visible, sh);
    return;
  }
#endif
  // The query row borrows the histogram, which phase 2 first zeroes after
  // the barrier below.
  float* q_s = reinterpret_cast<float*>(sh.hist);
  load_query_row<kKind>(index_q + t * query_values, query_values, q_s);
  __syncthreads();
  for (int64_t b0 = 0; b0 < visible; b0 += kFusedThreads)
    score_chunk<kKind, kVector, 1>(q_s, compressed_keys, keys, a.heads, a.scale, visible, b0, PackedDecoder<kKind>{},
                                   scores);
  __syncthreads();
  topk_phase<kFusedThreads>(a, t, visible, sh);
}

// Chunks b0, b0 + gridDim.y · kSelectDecodeChunk, ... of row t.
template <CodeKind kKind, bool kVector, class Code, class Decoder>
__device__ void score_row_chunks(const Code* compressed_keys, const SelectArgs& a, int64_t t, int32_t visible,
                                 int64_t b0, const float* q_s, const Decoder& decode) {
  const PagedKeys keys = request_keys(a, t);
  float* scores = a.score_scratch + t * a.score_stride;
  for (; b0 < visible; b0 += int64_t{gridDim.y} * kSelectDecodeChunk)
    score_chunk<kKind, kVector, kDecodeKeysPerThread>(q_s, compressed_keys, keys, a.heads, a.scale, visible, b0,
                                                      decode, scores);
}

// The prologue of both split scoring kernels: row t's decoded query (after
// the fp8 table when this key reader decodes through one, see
// select_decode_scores.hpp) in `shared`, a barrier, then body(q_s, decode)
// with the reader's decoder.
template <CodeKind kKind, bool kVector, class Code, class Body>
__device__ void with_query_and_decoder(float* shared, const Code* index_q, const SelectArgs& a, int64_t t,
                                       Body&& body) {
  constexpr bool kTable = kUsesFp8Table<kKind, kVector>;
  float* q_s = kTable ? shared + kFp8TableFloats : shared;
  const int query_values = a.heads * a.dim;
  load_query_row<kKind>(index_q + t * query_values, query_values, q_s);
  if constexpr (kTable) {
    const Fp8TableDecoder decode = load_fp8_table<kKind>(shared);
    __syncthreads();
    body(q_s, decode);
  } else {
    __syncthreads();
    body(q_s, PackedDecoder<kKind>{});
  }
}

// Decode path, phase 1, direct reader: block (t, c) scores chunks c, c +
// gridDim.y, ... of kSelectDecodeChunk blocks of row t; chunks at or past
// V(t) (all of a padding row's) exit at once. Runs the scalar reader, and
// the vector one for keys too long for the staged kernel's rings.
template <CodeKind kKind, bool kVector, class Code>
__global__ void __launch_bounds__(kDecodeScoreThreads, 2)
    select_decode_score_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a) {
  extern __shared__ float4 decode_shared[];  // [fp8 table] then [H_I * d_I] query floats, dynamic
  allow_dependent_launch();                   // the top-k's blocks may get ready (launch_decode)
  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  const int64_t b0 = int64_t{blockIdx.y} * kSelectDecodeChunk;
  if (b0 >= visible) return;  // uniform over the block
  with_query_and_decoder<kKind, kVector>(
      reinterpret_cast<float*>(decode_shared), index_q, a, t, [&](const float* q_s, const auto& decode) {
        score_row_chunks<kKind, kVector>(compressed_keys, a, t, visible, b0, q_s, decode);
      });
}

// Decode path, phase 1, staged reader (select_staged_scores.hpp): wave w of
// block (t, y) scores stages y · blockDim + w · warpSize + i · gridDim.y ·
// blockDim + [0, warpSize) of row t; blocks whose first stage is at or past
// V(t) exit at once, the others keep no barrier after the prologue.
template <CodeKind kKind, class Code>
__global__ void __launch_bounds__(kStagedMaxWaves * kWidestWave)
    select_staged_score_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a) {
  extern __shared__ float4 staged_shared[];  // [fp8 table], [H_I * d_I] query floats, the waves' rings; dynamic
  allow_dependent_launch();                   // the top-k's blocks may get ready (launch_decode)
  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  const int64_t first = int64_t{blockIdx.y} * blockDim.x;
  if (first >= visible) return;  // uniform over the block
  auto* shared = reinterpret_cast<float*>(staged_shared);
  const int vectors = a.dim / kCodesPerVector<kKind>;
  const int table_floats = kUsesFp8Table<kKind, true> ? kFp8TableFloats : 0;
  auto* rings = reinterpret_cast<uint4*>(shared + table_floats + a.heads * a.dim);
  const StagedWave wave(vectors, rings + wave_id() * kStagedSlots * warpSize * staged_stride(vectors),
                        compressed_keys);
  const StagedRun run{first + int64_t{wave_id()} * warpSize, int64_t{gridDim.y} * blockDim.x, visible};
  with_query_and_decoder<kKind, true>(shared, index_q, a, t, [&](const float* q_s, const auto& decode) {
    score_staged_run<kKind>(q_s, compressed_keys, request_keys(a, t), a.heads, a.scale, run, wave, decode,
                            a.score_scratch + t * a.score_stride);
  });
}

// Prefill path, phase 1: one block per chunk of shape.rows rows.
template <CodeKind kKind, class Code>
__global__ void __launch_bounds__(kPrefillScoreThreads)
    select_prefill_score_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a,
                                SelectPrefillShape shape) {
  extern __shared__ float tiles_s[];  // q [rows, q_stride] then keys [keys, k_stride], dynamic
  __shared__ int32_t vis_s[kSelectPrefillMaxRows];
  __shared__ uint32_t ok_s[kSelectPrefillMaxKeys];
  score_prefill_chunk<kKind>(index_q, compressed_keys, a, shape, tiles_s,
                             tiles_s + static_cast<size_t>(shape.rows) * shape.q_stride, vis_s, ok_s);
}

#if defined(QSA_GPU_CUDA)
inline constexpr int kMmaHistBytes = kRadixBins / 2 * static_cast<int>(sizeof(uint32_t));  // a block's 16-bit bins

// Decode path, phase 1 with tensor cores (select_mma_scores.hpp): wave w of
// block (t, y) scores the wave tiles y · kMmaWaves + w + i · gridDim.y ·
// kMmaWaves of row t; no barrier but the histogram's.
// kSmall: mma_small(H_I, d_I); kWhole: kSmall, kVector and d_I % 32 == 0
// (key loads without bound tests).
// With a.row_hist it also counts every score into row t's histogram there,
// for the top-k (hist_top_keys in select_topk.hpp): first into the block's
// own bins in shared memory, then the bins it filled into the row's with one
// atomic each. Atomics straight into the row's bins took select at 64 rows
// x 128K from 160 to 187 us: a row's scores crowd a few dozen bins, and
// every block of the row hit the same few addresses in L2. The block's bins
// are 16-bit (8 KiB), and the launcher asks for a carveout of 32 KiB of
// shared memory (Carveout::kSmallShared), the one this kernel had without
// them: two blocks of 16 KiB would need a larger one, and with one block
// per SM the kernel streamed its keys 2-4% slower (ncu, fourteenth pass).
// kStaged (d_I = 128, kSmall and kWhole): the keys reach the fragments
// through each wave's stage in shared memory (mma_score_tiles_staged), after
// the histogram's bins when the block counts.
template <bool kSmall, bool kVector, bool kWhole, bool kStaged>
__global__ void __launch_bounds__(kMmaScoreThreads, 2)
    select_mma_score_kernel(const uint16_t* index_q, const uint16_t* compressed_keys, SelectArgs a) {
  extern __shared__ uint4 hist_shared[];  // [kRadixBins / 2] uint32 when a.row_hist, then the stages; dynamic
  allow_dependent_launch();               // the top-k's blocks may get ready (launch_decode)
  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  const int64_t step = int64_t{gridDim.y} * kMmaWaves * kMmaTileKeys;
  const int64_t block_first = int64_t{blockIdx.y} * kMmaWaves * kMmaTileKeys;
  const int64_t first = block_first + int64_t{wave_id()} * kMmaTileKeys;
  if (block_first >= visible) return;  // uniform over the block
  constexpr int kHistVectors = kRadixBins / 8;  // uint4 of the block's bins
  uint32_t* hist = a.row_hist != nullptr ? reinterpret_cast<uint32_t*>(hist_shared) : nullptr;
  if (hist != nullptr) {  // uniform
    for (int i = static_cast<int>(threadIdx.x); i < kHistVectors; i += kMmaScoreThreads)
      hist_shared[i] = make_uint4(0u, 0u, 0u, 0u);
    __syncthreads();
  }
  if (first < visible) {  // uniform over the wave
    const auto q = mma_query<kSmall, kVector>(index_q + t * a.heads * a.dim, a.heads, a.dim);
    if constexpr (kStaged) {
      static_assert(kSmall && kWhole, "the stage holds whole rows of d_I = 128");
      unsigned char* stage = reinterpret_cast<unsigned char*>(hist_shared) + (hist != nullptr ? kMmaHistBytes : 0) +
                             wave_id() * kMmaStageBytes;
      mma_score_tiles_staged(q, compressed_keys, request_keys(a, t), a.heads, a.scale, visible, first, step,
                             a.score_scratch + t * a.score_stride, stage, hist);
    } else {
      mma_score_tiles<kSmall, kVector, kWhole>(q, compressed_keys, request_keys(a, t), a.heads, a.scale, visible,
                                               first, step, a.score_scratch + t * a.score_stride, hist);
    }
  }
  if (hist == nullptr) return;  // uniform
  __syncthreads();
  uint32_t* row = a.row_hist + t * kRadixBins;
  for (int i = static_cast<int>(threadIdx.x); i < kHistVectors; i += kMmaScoreThreads) {
    const uint4 v = hist_shared[i];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t lo = words[w] & 0xFFFFu;
      const uint32_t hi = words[w] >> 16;
      if (lo != 0u) atomicAdd(row + 8 * i + 2 * w, lo);
      if (hi != 0u) atomicAdd(row + 8 * i + 2 * w + 1, hi);
    }
  }
}

// Prefill path, phase 1 with tensor cores: block c takes rows [c · chunk,
// (c + 1) · chunk), run by run of one request (as score_prefill_chunk). Each
// wave takes tiles of the run's blocks, looks their cache rows up once and
// scores them for every row of the run that sees them: the run's rows read
// a tile's keys from L1 after the first.
template <bool kSmall, bool kVector>
__global__ void __launch_bounds__(kMmaScoreThreads)
    select_mma_prefill_kernel(const uint16_t* index_q, const uint16_t* compressed_keys, SelectArgs a, int chunk) {
  const int64_t c0 = int64_t{blockIdx.x} * chunk;
  const int64_t c1 = c0 + chunk < a.rows ? c0 + chunk : a.rows;
  for (int64_t r0 = c0; r0 < c1;) {
    const int32_t req = a.token_to_req[r0];
    int64_t r1 = r0 + 1;
    while (r1 < c1 && a.token_to_req[r1] == req) ++r1;
    if (req >= 0 && req < a.num_requests) {
      int32_t max_v = 0;
      for (int64_t r = r0; r < r1; ++r) {
        const int32_t v = guarded_visible(a, r);
        max_v = v > max_v ? v : max_v;
      }
      const PagedKeys keys = request_keys(a, r0);
      for (int64_t b0 = int64_t{wave_id()} * kMmaTileKeys; b0 < max_v; b0 += kMmaScoreThreads) {
        const int64_t b = b0 + (threadIdx.x & 31);
        const MmaTileKeys k =
            mma_tile_keys(compressed_keys, a.dim, b < max_v ? paged_row(keys, static_cast<int32_t>(b)) : -1);
        for (int64_t r = r0; r < r1; ++r) {
          const int32_t visible = guarded_visible(a, r);
          if (b0 >= visible) continue;  // uniform over the wave
          const auto q = mma_query<kSmall, kVector>(index_q + r * a.heads * a.dim, a.heads, a.dim);
          float s[4];
          mma_tile_scores<kSmall, kVector, false>(q, k, a.heads, a.dim, a.scale, s);
          mma_store_tile(k.mapped, s, b0, visible, a.score_scratch + r * a.score_stride);
        }
      }
    }
    r0 = r1;
  }
}
#endif

// Phase 2 of the split decode path and of the prefill path: one block of
// kThreads per row over the scratch the scoring kernel wrote earlier on the
// same stream.
// Row t's histogram from the scoring kernel (a.row_hist, see SelectArgs):
// this thread's kBinsPerThread bins into `bins`, and zeroes in their place
// for the next launch. 16-byte loads and stores: the launcher checked the
// alignment.
template <int kThreads>
__device__ void take_row_hist(const SelectArgs& a, int64_t t, uint32_t (&bins)[kBinsPerThread<kThreads>]) {
  static_assert(kBinsPerThread<kThreads> % 4 == 0, "whole 16-byte vectors of bins per thread");
  auto* mine = reinterpret_cast<uint4*>(a.row_hist + t * kRadixBins + threadIdx.x * kBinsPerThread<kThreads>);
#pragma unroll
  for (int v = 0; v < kBinsPerThread<kThreads> / 4; ++v) {
    const uint4 four = mine[v];
    bins[4 * v] = four.x;
    bins[4 * v + 1] = four.y;
    bins[4 * v + 2] = four.z;
    bins[4 * v + 3] = four.w;
    mine[v] = make_uint4(0u, 0u, 0u, 0u);
  }
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads) select_topk_kernel(SelectArgs a) {
  __shared__ TopKShared sh;
  wait_for_primary();  // the decode path launches it as a dependent of the scoring kernel
  const int64_t t = blockIdx.x;
  const bool hist = a.row_hist != nullptr;  // uniform
  uint32_t bins[kBinsPerThread<kThreads>] = {};
  if (hist) take_row_hist<kThreads>(a, t, bins);  // every row's, so that all are zero again
  const int32_t visible = guarded_visible(a, t);
  if (visible == 0) {
    write_empty_row<kThreads>(a, t, sh);
    return;
  }
  topk_phase<kThreads>(a, t, visible, sh, hist, bins);
}

// ---- launch --------------------------------------------------------------

// Blocks of the staged kernel one multiprocessor holds with `threads`
// threads and `bytes` of dynamic shared memory (device_limits.hpp: cached
// per device and shape; on NVIDIA the kernel opts in to more than 48 KiB
// and asks for the largest carveout, its key copies bypassing the L1).
template <CodeKind kKind, class Code>
int staged_blocks_per_sm(int threads, size_t bytes) {
  return resident_blocks(reinterpret_cast<const void*>(select_staged_score_kernel<kKind, Code>), threads, bytes);
}

// Blocks per row of a split scoring grid (rows, per_row) of `threads`-thread
// blocks, `slots` of which fit on the device at once: as many as fit beside
// the other rows' blocks, at least one, at most one per `threads` blocks of
// the longest row (and gridDim.y's limit: the kernels stride over it).
int64_t blocks_per_row(int64_t slots, int64_t rows, int32_t max_visible, int threads) {
  int64_t rounds = (int64_t{max_visible} + threads - 1) / threads;
  rounds = rounds < 65535 ? rounds : 65535;
  const int64_t per_row = slots / rows;
  return per_row < 1 ? 1 : per_row > rounds ? rounds : per_row;
}

// A staged scoring launch: grid (rows, per_row) of blocks of `waves` waves.
struct StagedShape {
  int waves = 0;  // 0: not even one wave's ring fits (keys of several KiB): the direct reader runs
  size_t shared_bytes = 0;
  int64_t per_row = 0;
};

// Each row gets as many blocks as fit on the device at once beside the
// other rows' (at least one, at most one per round of blockDim keys): no
// block waits for a second wave of the grid, and each streams many stages
// through its rings, so the prologue (query row, fp8 table) and the ring's
// fill and drain are paid a few times per row, not once per 512 keys. Of
// the block sizes whose rings fit, the one that keeps the most waves
// resident wins, ties going to the bigger block (fewer prologues): on an
// H200 at d_I = 128, 256 bf16 rows fill 256 of 396 slots of 4-wave blocks
// but 768 of 792 of 2-wave ones; 64 rows fill 384 of 396 (4 waves) or 768
// of 792 (2 waves), the same waves, so 4-wave blocks.
template <CodeKind kKind, class Code>
StagedShape staged_shape(const SelectLayout& l, const SelectArgs& a, const DeviceLimits& d) {
  const int table_floats = kUsesFp8Table<kKind, true> ? kFp8TableFloats : 0;
  const int vectors = a.dim / kCodesPerVector<kKind>;
  StagedShape best;
  int64_t best_waves = 0;
  for (int waves = kStagedMaxWaves; waves >= 1; waves /= 2) {
    const size_t bytes = staged_shared_bytes(table_floats, a.heads * a.dim, vectors, d.wave, waves);
    if (bytes > d.max_shared) continue;
    const int threads = waves * d.wave;
    const int64_t slots = int64_t{d.multiprocessors} * staged_blocks_per_sm<kKind, Code>(threads, bytes);
    const int64_t per_row = blocks_per_row(slots, l.rows, l.max_visible, threads);
    const int64_t blocks = l.rows * per_row;
    const int64_t resident_waves = (blocks < slots ? blocks : slots) * waves;
    if (resident_waves > best_waves) {
      best = {waves, bytes, per_row};
      best_waves = resident_waves;
    }
  }
  return best;
}

template <CodeKind kKind, class Code>
void launch_staged(const SelectLayout& l, const StagedShape& s, const DeviceLimits& d, const Code* index_q,
                   const Code* compressed_keys, const SelectArgs& args, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(l.rows), static_cast<unsigned>(s.per_row));
  select_staged_score_kernel<kKind, Code><<<grid, static_cast<unsigned>(s.waves * d.wave), s.shared_bytes, stream>>>(
      index_q, compressed_keys, args);
  QSA_GPU_CHECK_LAUNCH();
}

// The direct scoring kernel over (rows, chunks of kSelectDecodeChunk).
template <CodeKind kKind, bool kVector, class Code>
void launch_direct(const SelectLayout& l, const Code* index_q, const Code* compressed_keys, const SelectArgs& args,
                   hipStream_t stream) {
  const int64_t chunks = (int64_t{l.max_visible} + kSelectDecodeChunk - 1) / kSelectDecodeChunk;
  const dim3 grid(static_cast<unsigned>(l.rows), static_cast<unsigned>(chunks < 65535 ? chunks : 65535));
  const size_t table_floats = kUsesFp8Table<kKind, kVector> ? kFp8TableFloats : 0;
  const size_t dynamic_shared =
      sizeof(float) * (static_cast<size_t>(args.heads) * static_cast<size_t>(args.dim) + table_floats);
  select_decode_score_kernel<kKind, kVector, Code>
      <<<grid, kDecodeScoreThreads, dynamic_shared, stream>>>(index_q, compressed_keys, args);
  QSA_GPU_CHECK_LAUNCH();
}

#if defined(QSA_GPU_CUDA)
// Whether the launch's scores may be stored with the staged scorer's L2
// evict-last hint: at most half of the L2. Past that the hint keeps lines
// that the top-k cannot all find there (prefill select at 2048 rows x 32K,
// 64 MiB of scores: +4.7%); 256 rows x 128K (32 MiB, more than half of an
// H200's L2) neither gained nor lost. Larger launches take the register
// scorer, which reads its keys through L1 and stores plainly (fifteenth
// pass).
bool keep_scores_in_l2(const SelectLayout& l) {
  const size_t bytes = static_cast<size_t>(l.rows) * static_cast<size_t>(l.max_visible) * sizeof(float);
  return bytes <= device_limits().l2_bytes / 2;
}

// The tensor-core scorer over (rows, per_row) blocks: as many per row as
// fit on the device at once beside the other rows' (at least one, at most
// one per kMmaScoreThreads blocks of the longest row), so no block waits
// for a second wave and each wave streams many tiles. The register kernel
// reads its keys through L1: the largest L1 carveout took it from 153 to
// 135 us at 64 rows x 128K (docs/performance.md, twelfth pass); its only
// shared memory is the block's histogram (8 KiB) when it counts for the
// top-k. The staged kernel (kStaged) adds its waves' stages (64 KiB).
// Returns whether the scorer counted into args.row_hist: not when a block
// could score 2^16 keys or more (its 16-bit bins could overflow).
template <bool kSmall, bool kVector, bool kWhole, bool kStaged>
bool launch_mma_scores(const SelectLayout& l, const uint16_t* index_q, const uint16_t* compressed_keys,
                       const SelectArgs& args, hipStream_t stream) {
  const void* kernel = reinterpret_cast<const void*>(select_mma_score_kernel<kSmall, kVector, kWhole, kStaged>);
  // The staged kernel's copies bypass L1, so it takes the largest shared
  // memory carveout (two blocks of 64-72 KiB per SM).
  const Carveout carveout = kStaged ? Carveout::kMaxShared : Carveout::kSmallShared;
  const size_t stage_bytes = kStaged ? size_t{kMmaWaves} * kMmaStageBytes : 0;
  // Blocks per row with `bytes` of shared memory per block.
  const auto per_row_with = [&](size_t bytes) {
    const int64_t slots = int64_t{device_limits().multiprocessors} *
                          resident_blocks(kernel, kMmaScoreThreads, bytes, carveout);
    return blocks_per_row(slots, l.rows, l.max_visible, kMmaScoreThreads);
  };
  SelectArgs launch_args = args;
  int64_t per_row = per_row_with(stage_bytes + (args.row_hist != nullptr ? kMmaHistBytes : 0));
  if (args.row_hist != nullptr) {
    constexpr int64_t kRound = kMmaWaves * kMmaTileKeys;  // keys a block scores per round over its row
    const int64_t rounds = (int64_t{l.max_visible} + per_row * kRound - 1) / (per_row * kRound);
    if (rounds * kRound >= 65536) {  // a block's 16-bit bins could overflow: no histogram
      launch_args.row_hist = nullptr;
      per_row = per_row_with(stage_bytes);
    }
  }
  const bool count = launch_args.row_hist != nullptr;
  const dim3 grid(static_cast<unsigned>(l.rows), static_cast<unsigned>(per_row));
  select_mma_score_kernel<kSmall, kVector, kWhole, kStaged>
      <<<grid, kMmaScoreThreads, stage_bytes + (count ? kMmaHistBytes : 0), stream>>>(index_q, compressed_keys,
                                                                                      launch_args);
  QSA_GPU_CHECK_LAUNCH();
  return count;
}
#endif

// Phase 1 of the split decode path: the tensor-core scorer where this build
// has one for kKind, else the staged reader where its rings fit, else the
// direct one. Returns whether it counted into args.row_hist (only the
// tensor-core scorer does).
template <CodeKind kKind, bool kVector, class Code>
bool launch_split_scores(const SelectLayout& l, const Code* index_q, const Code* compressed_keys,
                         const SelectArgs& args, hipStream_t stream) {
#if defined(QSA_GPU_CUDA)
  if constexpr (kMmaScores<kKind>) {
    if (!mma_small(args.heads, args.dim))
      return launch_mma_scores<false, kVector, false, false>(l, index_q, compressed_keys, args, stream);
    if (kVector && args.dim == kMmaStagedDim && keep_scores_in_l2(l))
      return launch_mma_scores<true, kVector, kVector, kVector>(l, index_q, compressed_keys, args, stream);
    if (kVector && args.dim % kMmaChunkDims == 0)
      return launch_mma_scores<true, kVector, kVector, false>(l, index_q, compressed_keys, args, stream);
    return launch_mma_scores<true, kVector, false, false>(l, index_q, compressed_keys, args, stream);
  } else  // (the fma-chain kernels are not instantiated for kKind then)
#endif
  {
    if constexpr (kVector) {
      const DeviceLimits& d = device_limits();
      const StagedShape s = staged_shape<kKind, Code>(l, args, d);
      if (s.waves > 0) {
        launch_staged<kKind>(l, s, d, index_q, compressed_keys, args, stream);
        return false;
      }
    }
    launch_direct<kKind, kVector>(l, index_q, compressed_keys, args, stream);
    return false;
  }
}

// The decode path. When no row sees more than one chunk (max_visible <=
// kSelectDecodeChunk), splitting would add a launch and a round trip of the
// scores, so both phases run fused in one block per row. Longer rows are
// split: a scoring kernel whose grid spreads every row over many blocks
// keeps every SM streaming keys whatever the row count, then the top-k
// kernel reads the scores back from L2. bf16 on NVIDIA scores through the
// tensor-core kernel; otherwise the vector reader scores through the staged
// kernel where its rings fit, the scalar one (and keys too long to stage)
// through the direct kernel (launch_split_scores).
template <CodeKind kKind, bool kVector, class Code>
void launch_decode(const SelectLayout& l, const Code* index_q, const Code* compressed_keys, const SelectArgs& args,
                   hipStream_t stream) {
  const unsigned rows = static_cast<unsigned>(l.rows);
  if (l.max_visible <= kSelectDecodeChunk) {
    bool small = true;  // the fma-chain kinds ignore it
#if defined(QSA_GPU_CUDA)
    if constexpr (kMmaScores<kKind>) small = mma_small(args.heads, args.dim);
#endif
    if (small) {
      select_decode_kernel<kKind, kVector, Code, true><<<rows, kFusedThreads, 0, stream>>>(index_q, compressed_keys,
                                                                                          args);
    } else {
      if constexpr (kMmaScores<kKind>)
        select_decode_kernel<kKind, kVector, Code, false><<<rows, kFusedThreads, 0, stream>>>(index_q,
                                                                                             compressed_keys, args);
    }
    QSA_GPU_CHECK_LAUNCH();
    return;
  }
  SelectArgs topk_args = args;  // the top-k reads the row histograms only where the scorer counted
  if (!launch_split_scores<kKind, kVector>(l, index_q, compressed_keys, args, stream)) topk_args.row_hist = nullptr;
  // 1024 threads per row while every row has an SM of its own, 512 beyond:
  // there two 512-thread blocks share an SM where 1024-thread ones would
  // queue for a second wave (256 rows: 5-12% slower). At 64 rows x 128K the
  // larger blocks took select from 194 to 178 us, mostly because they cannot
  // become resident beside the scoring blocks: 512-thread top-k blocks placed
  // early by the dependent launch cost ~13 us (a plain launch of them measured
  // 181 us); one row x 32K is 1 us slower (docs/performance.md, tenth pass).
  if (int64_t{rows} <= device_limits().multiprocessors) {
    launch_dependent(select_topk_kernel<kTopKMaxThreads>, dim3(rows), dim3(kTopKMaxThreads), stream, topk_args);
  } else {
    launch_dependent(select_topk_kernel<kTopKMaxThreads / 2>, dim3(rows), dim3(kTopKMaxThreads / 2), stream,
                     topk_args);
  }
}

template <CodeKind kKind, class Code>
void launch_kernels(const SelectLayout& l, const SelectPrefillShape* prefill, bool vector_keys,
                    const void* index_q, const void* compressed_keys, const SelectArgs& args, hipStream_t stream) {
  const auto* q = static_cast<const Code*>(index_q);
  const auto* k = static_cast<const Code*>(compressed_keys);
  if (prefill == nullptr) {
    if (vector_keys) {
      launch_decode<kKind, true>(l, q, k, args, stream);
    } else {
      launch_decode<kKind, false>(l, q, k, args, stream);
    }
    return;
  }
  const int64_t chunks = (l.rows + prefill->rows - 1) / prefill->rows;
#if defined(QSA_GPU_CUDA)
  if constexpr (kMmaScores<kKind>) {
    const unsigned grid = static_cast<unsigned>(chunks);
    const bool small = mma_small(args.heads, args.dim);
    if (small && vector_keys) {
      select_mma_prefill_kernel<true, true><<<grid, kMmaScoreThreads, 0, stream>>>(q, k, args, prefill->rows);
    } else if (small) {
      select_mma_prefill_kernel<true, false><<<grid, kMmaScoreThreads, 0, stream>>>(q, k, args, prefill->rows);
    } else if (vector_keys) {
      select_mma_prefill_kernel<false, true><<<grid, kMmaScoreThreads, 0, stream>>>(q, k, args, prefill->rows);
    } else {
      select_mma_prefill_kernel<false, false><<<grid, kMmaScoreThreads, 0, stream>>>(q, k, args, prefill->rows);
    }
  } else
#endif
  {
    select_prefill_score_kernel<kKind, Code>
        <<<static_cast<unsigned>(chunks), kPrefillScoreThreads, prefill->shared_bytes(), stream>>>(q, k, args,
                                                                                                   *prefill);
  }
  QSA_GPU_CHECK_LAUNCH();
  select_topk_kernel<kTopKMaxThreads / 2><<<static_cast<unsigned>(l.rows), kTopKMaxThreads / 2, 0, stream>>>(args);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace

}  // namespace select_detail

void select_zero_row_hist(const SelectLayout& l, float* score_scratch, hipStream_t stream) {
  check_select_layout(l);
  if (!select_has_row_hist(l)) return;
  if (score_scratch == nullptr) throw InputError("select_zero_row_hist: the score scratch pointer is null");
  QSA_GPU_CHECK(hipMemsetAsync(score_scratch + select_row_hist_offset(l), 0,
                               static_cast<size_t>(l.rows) * kSelectRowHistBins * sizeof(uint32_t), stream));
}

void launch_select(const SelectParams& p, const IndexerCodes& codes, const SelectLayout& layout,
                   const void* index_q, const void* compressed_keys, const int32_t* token_to_req,
                   const int32_t* visible_blocks, const int32_t* block_table_c, float* score_scratch,
                   int32_t* block_ids, float* block_scores, hipStream_t stream, SelectPath path) {
  using namespace select_detail;
  check_select_params(p, codes);
  check_select_layout(layout);
  if (path != SelectPath::kAuto && path != SelectPath::kDecode && path != SelectPath::kPrefill)
    throw ConfigError("launch_select: unknown select path");
  if (layout.rows == 0) return;
  if (index_q == nullptr || token_to_req == nullptr || visible_blocks == nullptr || block_ids == nullptr ||
      block_scores == nullptr)
    throw InputError("launch_select: a per-row device pointer is null");
  if (layout.max_visible > 0 && (compressed_keys == nullptr || score_scratch == nullptr || block_table_c == nullptr))
    throw InputError("launch_select: blocks are visible but the compressed cache, block table or score "
                     "scratch pointer is null");

  SelectArgs args{};
  args.token_to_req = token_to_req;
  args.visible_blocks = visible_blocks;
  args.block_table_c = block_table_c;
  args.score_scratch = score_scratch;
  args.row_hist = nullptr;
  args.block_ids = block_ids;
  args.block_scores = block_scores;
  args.rows = layout.rows;
  args.num_requests = layout.num_requests;
  args.max_pages = layout.max_pages;
  args.num_pages = layout.num_pages;
  args.rows_per_page = layout.rows_per_page;
  args.score_stride = layout.score_stride;
  args.heads = p.heads;
  args.dim = p.dim;
  args.blocks_budget = p.blocks_budget;
  args.scale = static_cast<float>(p.score_scale);

  // The decode scorer's 16-byte key reads: whole vectors per key row and an
  // aligned cache (rows then start at multiples of 16 bytes too). The
  // tensor-core scorer (bf16 on NVIDIA) reads 8 codes at a time, of the query
  // too.
#if defined(QSA_GPU_CUDA)
  const bool mma_scores = codes.dtype == IndexerDtype::kBf16;
#else
  const bool mma_scores = false;
#endif
  const bool vector_keys = mma_scores ? p.dim % 8 == 0 && is_aligned(compressed_keys, 16) && is_aligned(index_q, 16)
                                      : p.dim % 16 == 0 && is_aligned(compressed_keys, 16);
  const SelectPrefillShape shape = select_prefill_shape(p);
  const SelectPrefillShape* prefill =
      resolve_select_path(p, layout, path) == SelectPath::kPrefill ? &shape : nullptr;
  // The row histograms (select.hpp), where the scorer counts into them: the
  // split decode path's tensor-core scorer. Its top-k blocks read 16-byte
  // vectors of bins, hence the alignment.
  if (mma_scores && prefill == nullptr && layout.max_visible > kSelectDecodeChunk && select_has_row_hist(layout) &&
      is_aligned(score_scratch, 16))
    args.row_hist = reinterpret_cast<uint32_t*>(score_scratch + select_row_hist_offset(layout));
  if (codes.dtype == IndexerDtype::kBf16) {
    launch_kernels<CodeKind::kBf16, uint16_t>(layout, prefill, vector_keys, index_q, compressed_keys, args, stream);
  } else if (codes.fp8_flavor == Fp8Flavor::kE4m3fnuz) {
    launch_kernels<CodeKind::kFp8Fnuz, uint8_t>(layout, prefill, vector_keys, index_q, compressed_keys, args, stream);
  } else {  // e4m3fn and its eager-NaN variant decode alike
    launch_kernels<CodeKind::kFp8Fn, uint8_t>(layout, prefill, vector_keys, index_q, compressed_keys, args, stream);
  }
}

}  // namespace qsa::gpu
