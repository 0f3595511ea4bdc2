// Decode-path selection on the GPU (spec section 5, reference/select.hpp):
//
//   I(t, b) = s · Σ_h ReLU(q_I[t, h] · k_c[b])   for the visible blocks b < V(t)
//
// in fp32, then the canonical top-K_B: descending score, ties to the lower
// block id, NaN above every number. Output rows hold min(V, K_B) ids then -1
// (scores then -inf); padding rows (token_to_req = -1) and rows with V = 0
// are all -1 / -inf.
//
// One thread block per query row. Phase 1 scores every visible block into a
// caller-provided scratch row; phase 2 radix-selects the K-th largest 64-bit
// key (orderable score bits, inverted id) over that row, gathers the winners
// and sorts them with a bitonic sort in shared memory. See docs/gpu-validation.md
// (select) for limits.
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

// Element type of index_q and of the compressed cache (the indexer dtype).
struct IndexerCodes {
  IndexerDtype dtype = IndexerDtype::kBf16;
  Fp8Flavor fp8_flavor = Fp8Flavor::kE4m3fn;  // only read when dtype is kFp8
  size_t bytes() const { return dtype == IndexerDtype::kFp8 ? 1 : 2; }
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
// the kernel's limits (ConfigError) and a self-consistent layout (InputError).
void check_select_params(const SelectParams& p, const IndexerCodes& codes);
void check_select_layout(const SelectLayout& layout);

// Floats the score scratch needs: rows · score_stride.
inline size_t select_scratch_floats(const SelectLayout& l) {
  return static_cast<size_t>(l.rows) * static_cast<size_t>(l.score_stride);
}

// Launches the selection on `stream` (asynchronous; nothing is synchronised).
// Device pointers, all row-major:
//   index_q          [T, H_I, d_I]  uint16_t bf16 bits, or uint8_t fp8 codes (codes.dtype)
//   compressed_keys  [num_pages · rows_per_page, d_I]  same element type;
//                    block b of request q lives at row
//                    block_table_c[q, b div rows_per_page] · rows_per_page + b mod rows_per_page
//   token_to_req     [T] int32, -1 on padding rows
//   visible_blocks   [T] int32, V(t)
//   block_table_c    [R, max_pages] int32, -1 = unmapped page
//   score_scratch    [T, score_stride] float; on return row t holds the fp32
//                    score of every block b < V(t) (the rest is untouched),
//                    which tests read back to check both phases separately
//   block_ids        [T, K_B] int32 output
//   block_scores     [T, K_B] float output (the selected blocks' fp32 scores)
// Throws ConfigError / InputError for params or a layout the kernel cannot
// run (the same limits as validate_select), InternalError on a GPU failure.
void launch_select(const SelectParams& p, const IndexerCodes& codes, const SelectLayout& layout,
                   const void* index_q, const void* compressed_keys, const int32_t* token_to_req,
                   const int32_t* visible_blocks, const int32_t* block_table_c, float* score_scratch,
                   int32_t* block_ids, float* block_scores, hipStream_t stream);

}  // namespace qsa::gpu
