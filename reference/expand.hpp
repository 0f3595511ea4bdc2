// Expansion of selected blocks to request-relative token ids (spec section 6).
// Row width W = K + r - 1 (plus one count column when p.count_column):
//   n_exp   = (number of valid block ids) · r          (= min(V, K_B) · r)
//   t_start = ((p + 1) div r) · r,  n_tail = p + 1 - t_start
//   c < n_exp                  -> block[c div r]·r + c mod r
//   n_exp <= c < n_exp+n_tail  -> t_start + (c - n_exp)
//   otherwise                  -> -1
// With the count column, the last column holds n_exp + n_tail (the loop
// bound, never a token id). Padding rows (p < 0) are all -1 with count 0.
//
// Beside the ids, an engine may hand attention each id's main-cache slot
// (token_slots, reference/core/step_layout.hpp), so that the attention kernel reads one array instead
// of the ids and then the block table (docs/semantics.md section 8).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// blocks: [K_B] with a valid prefix then -1; out: [p.width()].
void expand_row(const ExpandParams& p, const int32_t* blocks, int blocks_budget, int64_t pos, int32_t* out);

// block_ids: [T, K_B]; pos: [T] -> token_idx: [T, p.width()].
void expand_rows(const ExpandParams& p, const TensorI32& block_ids, const std::vector<int64_t>& pos,
                 TensorI32& token_idx);

}  // namespace qsa
