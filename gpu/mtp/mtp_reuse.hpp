// MTP top-k reuse on the GPU (spec section 9; reference/mtp_reuse.hpp, bit
// for bit). The saved rows live in device buffers of R rows that the caller
// keeps from a selecting step (draft step 0) to the reuse steps after it.
//
// Both kernels only copy and fill: no value is used as an address except
// last_row and token_to_req, which must have passed validate_mtp_save /
// validate_mtp_reuse (gpu/mtp/mtp_validate.hpp) on the host. Scores are fp32
// here (the select kernel's output) where the reference keeps doubles that
// hold the same fp32 values; copies keep every bit, NaN payloads included.
//
// ConfigError for blocks_budget < 1 or width < 1 (and width < 2 with the
// count column); InputError for negative or >= 2^31 row counts and for a
// null pointer when there is work. Zero rows launch nothing.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/mtp/mtp_validate.hpp"

namespace qsa::gpu {

// After a selecting step (save_mtp_rows): saved row i <- row last_row[i].
//   last_row:     [num_reqs] int32, row_end(i) - 1 (mtp_last_rows); always a
//                 row of the step, since every request has a token in it
//   block_ids:    [T, blocks_budget] int32
//   block_scores: [T, blocks_budget] float
//   token_idx:    [T, width] int32, count column (if any) included in width
//   saved_ids:    [num_reqs, blocks_budget] int32 output
//   saved_scores: [num_reqs, blocks_budget] float output
//   saved_idx:    [num_reqs, width] int32 output
// (a last_row entry < 0, which validate_mtp_save rejects, leaves its saved
// row untouched rather than reading out of bounds.)
void launch_mtp_save(int num_reqs, int blocks_budget, int width, const int32_t* last_row, const int32_t* block_ids,
                     const float* block_scores, const int32_t* token_idx, int32_t* saved_ids, float* saved_scores,
                     int32_t* saved_idx, hipStream_t stream);

// In a draft step >= 1 (reuse_mtp_rows): row t <- saved row token_to_req[t].
// Padding rows (token_to_req[t] = -1) get -1 ids, -inf scores and -1 token
// ids, with 0 in the last column when count_column.
//   token_to_req: [num_tokens] int32, -1 or < the number of saved rows
//   saved_*:      as written by launch_mtp_save
//   block_ids:    [num_tokens, blocks_budget] int32 output
//   block_scores: [num_tokens, blocks_budget] float output
//   token_idx:    [num_tokens, width] int32 output
void launch_mtp_reuse(int64_t num_tokens, int blocks_budget, int width, bool count_column,
                      const int32_t* token_to_req, const int32_t* saved_ids, const float* saved_scores,
                      const int32_t* saved_idx, int32_t* block_ids, float* block_scores, int32_t* token_idx,
                      hipStream_t stream);

}  // namespace qsa::gpu
