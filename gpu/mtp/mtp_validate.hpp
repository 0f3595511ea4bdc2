// Host-side checks and metadata of MTP top-k reuse on the GPU (spec section
// 9; reference/mtp_reuse.hpp), kept apart from the launchers so they compile
// without any GPU runtime header.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

// last_row for launch_mtp_save: request i's last token, row_end(i) - 1, the
// row save_mtp_rows copies. derive_step_layout gives every request at least
// one token, so every entry is a row of the step.
std::vector<int32_t> mtp_last_rows(const StepLayout& layout);

// InputError unless every last_row[i] is a row of the step, 0 <= it <
// num_tokens. The reference has no "request without a token" (the layout
// rejects it), so -1 is rejected too rather than given a meaning of our own.
void validate_mtp_save(const std::vector<int32_t>& last_row, int64_t num_tokens);

// InputError unless saved_rows > 0 (a reuse step before any selecting step
// has nothing to reuse, as in reuse_mtp_rows) and every token_to_req[t] is -1
// (padding) or a saved row, 0 <= it < saved_rows. Messages name the entry.
void validate_mtp_reuse(const std::vector<int32_t>& token_to_req, int64_t saved_rows);

}  // namespace qsa::gpu
