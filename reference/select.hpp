// Block scores, visibility and canonical top-k (spec section 5).
//
//   I(p, b) = s · Σ_h ReLU(q_I[h] · k_c[b])   over visible blocks b < V(p)
//
// Top-k keeps the min(V, K_B) highest scores, ordered by descending score,
// ties to the lower block id; a NaN score ranks above every number (as
// torch.topk does). Slots past the valid prefix are -1, and so are all slots
// of padding rows and of rows with V = 0.
#pragma once

#include <cstdint>

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// Scores of one query row q[H_I, d_I] against kc[n_blocks, d_I] (row-major).
void block_scores_row(const SelectParams& p, const double* q, const double* kc, int64_t n_blocks,
                      double* scores);

// Canonical top-k over scores[0, visible): ids[K_B] and their scores
// (-1 and -inf past the prefix). Returns the number of valid ids.
int top_k_blocks(const double* scores, int64_t visible, int blocks_budget, int32_t* ids,
                 double* top_scores);

// True when a beats b in the canonical order (NaN first, then descending
// score, then lower id).
bool block_precedes(double score_a, int32_t id_a, double score_b, int32_t id_b);

// Selects for the rows [row_begin, row_end) of one request. q_index: [T, H_I,
// d_I]; kc: the request's compressed keys [n_blocks, d_I] (block b at row b;
// n_blocks >= every visible[row]); block_ids / top_scores: [T, K_B] written
// only for those rows.
void select_rows(const SelectParams& p, const TensorD& q_index, const std::vector<int32_t>& visible,
                 int64_t row_begin, int64_t row_end, const TensorD& kc, TensorI32& block_ids,
                 TensorD& top_scores);

}  // namespace qsa
