// Selection on the GPU (spec section 5, reference/select.hpp):
//
//   I(t, b) = s · Σ_h ReLU(q_I[t, h] · k_c[b])   for the visible blocks b < V(t)
//
// in fp32, then the canonical top-K_B: descending score, ties to the lower
// block id, NaN above every number. Output rows hold min(V, K_B) ids then -1
// (scores then -inf); padding rows (token_to_req = -1) and rows with V = 0
// are all -1 / -inf.
//
// Two paths share the score scratch and the top-k phase:
//  - decode: when no row sees more than kSelectDecodeChunk (512) blocks,
//    both phases run fused, one thread block per row. Otherwise they are
//    split: a scoring kernel, then a top-k kernel, one block per row, runs
//    phase 2 over the scratch row. When d_I % 16 == 0 and the cache is
//    16-byte aligned the scoring kernel stages keys through shared memory:
//    each row gets as many blocks as fit on the device at once, each wave
//    copies the keys of a wave's worth of consecutive blocks with coalesced
//    16-byte copies (cp.async on NVIDIA) while it scores the previous ones,
//    one key per lane, fp8 codes decoded through a table in shared memory
//    (gpu/select/select_staged_scores.hpp). Otherwise (or for keys too long
//    to stage) a grid of (rows, chunks of 512 blocks) reads each key
//    directly, with 16-byte loads or one code at a time
//    (gpu/select/select_decode_scores.hpp).
//  - prefill: a scoring kernel where one thread block takes a chunk of up to
//    select_prefill_shape(p).rows consecutive rows (16 for the released
//    model); each maximal run of rows of ONE request inside the chunk (rows of
//    different requests never share a run) streams that request's compressed
//    keys through shared memory in tiles of `keys` blocks, decoded once for
//    all the run's rows and heads. It writes the same scratch layout, then
//    the top-k kernel runs phase 2 unchanged.
// Phase 2 radix-selects the K-th largest 64-bit key (orderable score bits,
// inverted id) with 12-bit digits and wave-aggregated histogram counts,
// resolves the last digits over the K-th key's bucket in shared memory, and
// sorts the winners with a bitonic sort (gpu/select/select_topk.hpp). For
// launches of at most 16 rows the tensor-core scorer also counts the first
// digit of every score into the scratch's row histograms (below), which
// spares the top-k its sampling pass.
// All paths of a build compute every score with the same sequence, so the
// prefill path's scratch, ids and scores are bit-identical to the decode
// path's: per head one fma chain over j = 0 .. d_I - 1, heads added in
// increasing h, then times s (select_scores.hpp); except bf16 codes on
// NVIDIA, where per group of 8 heads one chain of bf16 m16n8k16 tensor-core
// mmas over the dims replaces the fma chains and one wave scores 32 blocks
// with 16-byte loads, no staging, in every path (select_mma_scores.hpp). The
// two formulas' bits differ; tests/tolerances.hpp bounds both against the
// fp64 reference. The tiles are found in-kernel from token_to_req: the prefill path
// needs no extra input. See docs/gpu-validation.md (select) for limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/common/device_api.hpp"
#include "reference/core/config.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::gpu {

// Limits of this kernel (validate_select rejects anything beyond them).
inline constexpr int kSelectMaxBlocksBudget = 2048;  // K_B: the bitonic sort buffer in shared memory
inline constexpr int kSelectMaxQueryValues = 4096;   // H_I · d_I: the decoded query row in shared memory
// Blocks of one row scored by one thread block of the decode path's scoring
// kernel; a launch whose rows all see at most this many takes the fused
// kernel instead.
inline constexpr int kSelectDecodeChunk = 512;

// Element type of index_q and of the compressed cache (the indexer dtype).
struct IndexerCodes {
  IndexerDtype dtype = IndexerDtype::kBf16;
  Fp8Flavor fp8_flavor = Fp8Flavor::kE4m3fn;  // only read when dtype is kFp8
  size_t bytes() const { return dtype == IndexerDtype::kFp8 ? 1 : 2; }
};

// Which kernels launch_select runs. kAuto takes the prefill path when the
// rows share keys enough to pay for the separate top-k launch:
//   real_rows / num_requests >= kSelectPrefillMinRowsPerRequest (8), and
//   select_prefill_shape(p).rows >= kSelectPrefillMinTileRows (4);
// otherwise (decode batches, MTP steps, or H_I · d_I so large that a tile
// holds fewer than 4 rows) the decode path. With 8 rows per request a
// 16-row chunk holds one or two runs, so each compressed key is read from
// global memory about 4-16 times less often than by the decode path; with
// 1-4 rows per request the chunk would serialise several requests' runs in
// one block. The thresholds are a reasoned default, not yet tuned on a GPU.
enum class SelectPath { kAuto, kDecode, kPrefill };
inline constexpr int64_t kSelectPrefillMinRowsPerRequest = 8;
inline constexpr int kSelectPrefillMinTileRows = 4;
inline constexpr int kSelectPrefillMaxRows = 16;  // rows per chunk of the prefill scoring kernel
inline constexpr int kSelectPrefillMaxKeys = 16;  // compressed keys per shared-memory tile

// Shared-memory tile of the prefill scoring kernel for given params: `rows`
// decoded query rows (row stride q_stride floats) and `keys` decoded
// compressed keys (stride k_stride floats; odd strides keep the threads of a
// wave on distinct banks) within kSelectPrefillSharedBytes of dynamic shared
// memory, below the 48 KiB every backend grants without opting in. H_I = 4,
// d_I = 128 gives 16 rows and 16 keys; H_I · d_I = 4096 gives 1 row.
inline constexpr int kSelectPrefillSharedBytes = 44 * 1024;
struct SelectPrefillShape {
  int rows = 1;
  int keys = 1;
  int q_stride = 1;
  int k_stride = 1;
  size_t shared_bytes() const {
    return sizeof(float) * (static_cast<size_t>(rows) * q_stride + static_cast<size_t>(keys) * k_stride);
  }
};

// Sizes of one selection launch. validate_select fills it from host copies of
// the metadata; launch_select re-checks the parts it can without them.
struct SelectLayout {
  int64_t rows = 0;          // T, padding rows included
  int num_requests = 0;      // R
  int max_pages = 0;         // columns of block_table_c
  int64_t num_pages = 0;     // pages of the compressed cache
  int rows_per_page = 0;     // P / r compressed rows per page
  int32_t max_visible = 0;   // max over rows of visible_blocks
  int64_t score_stride = 0;  // floats per row of the score scratch (>= max_visible)
  int64_t real_rows = 0;     // rows with token_to_req >= 0; only SelectPath::kAuto reads
                             // it (0 = unknown: every row counts)

  int64_t cache_rows() const { return num_pages * rows_per_page; }
};

// Checks the host copies of everything launch_select reads through an index
// and returns the layout to launch with (score_stride = max_visible).
// Throws ConfigError for params beyond the kernel's limits and InputError
// naming the first bad entry:
//  - token_to_req[t] in [-1, R), one entry per row; visible_blocks[t] >= 0,
//    and 0 on padding rows (token_to_req = -1);
//  - block_table_c [R, max_pages] entries in [-1, num_pages);
//  - every visible block of a row has a mapped page: for b < V(t), page
//    b div rows_per_page lies within the table and its entry is not -1 (the
//    reference's gather_compressed_keys throws for the same rows).
// Whether a mapped row really holds block b (not a stale one) is the trace
// validator's job: the kernel has no per-row block tags.
SelectLayout validate_select(const SelectParams& p, const IndexerCodes& codes, int64_t num_pages,
                             int rows_per_page, const std::vector<int32_t>& token_to_req,
                             const std::vector<int32_t>& visible_blocks, const TensorI32& block_table_c);

// The checks launch_select runs itself (no host copies needed): params within
// the kernel's limits (ConfigError) and a self-consistent layout (InputError;
// visible blocks need a compressed cache of at least one row).
void check_select_params(const SelectParams& p, const IndexerCodes& codes);
void check_select_layout(const SelectLayout& layout);

// The prefill scoring tile for params that passed check_select_params.
SelectPrefillShape select_prefill_shape(const SelectParams& p);

// The path launch_select runs for `path` (kAuto resolved as described above).
SelectPath resolve_select_path(const SelectParams& p, const SelectLayout& layout, SelectPath path);

// The score scratch: rows · score_stride floats of scores, then, for
// launches of at most kSelectRowHistMaxRows rows, a [rows, 4096] uint32
// histogram per row. The decode path's tensor-core scorer counts each score
// there by its top 12 key bits as it writes it, so that the top-k finds the
// bin of the K-th key without a pass of its own; the top-k zeroes each
// row's bins after reading them. It pays where a row's top-k is the tail of
// the launch: on an H200, select at 1 and 8 rows 6-14% faster; at 64 rows
// no faster, as the counting costs the scorer what the top-k saves
// (docs/performance.md, fourteenth pass), hence the limit of 16 rows.
// The histograms should be zero before the first launch on a scratch
// (hipMemset once, as select_zero_row_hist does): any other content only
// costs speed, as the top-k checks what it reads against the scores and
// takes its other paths when they disagree.
inline constexpr int kSelectRowHistBins = 4096;
inline constexpr int64_t kSelectRowHistMaxRows = 16;

// Offset of the histograms in the scratch, in floats (a multiple of 4, so
// 16-byte aligned when the scratch is), and whether the layout has them.
inline size_t select_row_hist_offset(const SelectLayout& l) {
  const size_t scores = static_cast<size_t>(l.rows) * static_cast<size_t>(l.score_stride);
  return (scores + 3) / 4 * 4;
}
inline bool select_has_row_hist(const SelectLayout& l) { return l.rows > 0 && l.rows <= kSelectRowHistMaxRows; }

// Floats the score scratch needs.
inline size_t select_scratch_floats(const SelectLayout& l) {
  if (!select_has_row_hist(l)) return static_cast<size_t>(l.rows) * static_cast<size_t>(l.score_stride);
  return select_row_hist_offset(l) + static_cast<size_t>(l.rows) * kSelectRowHistBins;
}

// Zeroes the histograms of a scratch of select_scratch_floats(l) floats on
// `stream` (nothing when the layout has none).
void select_zero_row_hist(const SelectLayout& l, float* score_scratch, hipStream_t stream);

// Launches the selection on `stream` (asynchronous; nothing is synchronised)
// through the decode or the prefill path (see SelectPath); both give the same
// bits and need the same inputs.
// Device pointers, all row-major:
//   index_q          [T, H_I, d_I]  uint16_t bf16 bits, or uint8_t fp8 codes (codes.dtype)
//   compressed_keys  [num_pages · rows_per_page, d_I]  same element type;
//                    block b of request q lives at row
//                    block_table_c[q, b div rows_per_page] · rows_per_page + b mod rows_per_page
//   token_to_req     [T] int32, -1 on padding rows
//   visible_blocks   [T] int32, V(t)
//   block_table_c    [R, max_pages] int32, -1 = unmapped page
//   score_scratch    select_scratch_floats(layout) floats: [T, score_stride]
//                    scores, then the row histograms (see above); on return
//                    row t holds the fp32 score of every block b < V(t) (the
//                    rest of its row is untouched), which tests read back to
//                    check both phases separately, and the histograms are zero
//   block_ids        [T, K_B] int32 output
//   block_scores     [T, K_B] float output (the selected blocks' fp32 scores)
// Throws ConfigError / InputError for params or a layout the kernel cannot
// run (the same limits as validate_select), InternalError on a GPU failure.
void launch_select(const SelectParams& p, const IndexerCodes& codes, const SelectLayout& layout,
                   const void* index_q, const void* compressed_keys, const int32_t* token_to_req,
                   const int32_t* visible_blocks, const int32_t* block_table_c, float* score_scratch,
                   int32_t* block_ids, float* block_scores, hipStream_t stream,
                   SelectPath path = SelectPath::kAuto);

}  // namespace qsa::gpu
