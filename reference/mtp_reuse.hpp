// MTP top-k reuse (spec section 9). After a selecting step, each request's
// last-token row (block ids, scores, token ids with the count) is saved at
// the front of the buffer, row i for request i. In a draft step >= 1 every
// token of request i attends through saved row i: scoring, top-k and
// expansion are skipped, so a draft token attends neither to itself nor to
// earlier draft tokens of the same iteration. All cache writes still happen.
#pragma once

#include "reference/core/step_layout.hpp"
#include "reference/step_driver.hpp"

namespace qsa {

MtpRows save_mtp_rows(const StepLayout& layout, const TensorI32& block_ids, const TensorD& block_scores,
                      const TensorI32& token_idx);

// Fills block_ids, block_scores and token_idx ([T, ...]) from the saved
// rows; InputError when there are none or too few for the step's requests.
// Padding rows are all -1 (count 0 when count_column).
void reuse_mtp_rows(const StepLayout& layout, const MtpRows& saved, bool count_column,
                    TensorI32& block_ids, TensorD& block_scores, TensorI32& token_idx);

}  // namespace qsa
