// Host-side validation of the expand stage's inputs, kept apart from the
// launcher so it compiles without any GPU runtime header.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::gpu {

// Applies the rules of reference expand_rows to host copies of the inputs,
// so that the kernel only ever sees what the reference accepts:
//  - ConfigError unless r >= 1 and K is a positive multiple of r;
//  - InputError unless block_ids is [T, K / r] with T = pos.size();
//  - per row with pos >= 0, the valid prefix (ids up to the first -1) must
//    name completed blocks, 0 <= id < (pos + 1) div r; ids after the first
//    -1 are ignored, as the reference ignores them (the prefix contract);
//  - InputError for pos >= 2^31 - 1, whose token ids would not fit int32.
// Messages name the row and slot.
void validate_expand(const ExpandParams& p, const TensorI32& block_ids, const std::vector<int64_t>& pos);

}  // namespace qsa::gpu
