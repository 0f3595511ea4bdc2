// Kernel arguments shared by the select kernels (select.hip) and the
// prefill scoring phase (select_prefill_scores.hpp). Device code only.
#pragma once

#include <cstdint>

namespace qsa::gpu::select_detail {

struct SelectArgs {
  const int32_t* token_to_req;   // [T]
  const int32_t* visible_blocks; // [T]
  const int32_t* block_table_c;  // [R, max_pages]
  float* score_scratch;          // [T, score_stride]
  uint32_t* row_hist;            // [T, kRadixBins] or null: the scorer counts, the top-k reads and zeroes
  int32_t* block_ids;            // [T, K_B]
  float* block_scores;           // [T, K_B]
  int64_t rows;                  // T
  int num_requests;
  int max_pages;
  int64_t num_pages;
  int rows_per_page;
  int64_t score_stride;
  int heads;
  int dim;
  int blocks_budget;
  float scale;
};

// V(t) as the kernels use it: 0 for padding rows and out-of-range requests,
// clamped to the scratch row. Cheap guards; validate_select has already
// rejected such inputs.
__device__ inline int32_t guarded_visible(const SelectArgs& a, int64_t t) {
  const int32_t req = a.token_to_req[t];
  int32_t visible = a.visible_blocks[t];
  if (req < 0 || req >= a.num_requests || visible < 0) visible = 0;
  if (visible > a.score_stride) visible = static_cast<int32_t>(a.score_stride);
  return visible;
}

}  // namespace qsa::gpu::select_detail
