// Expansion of selected block ids to request-relative token ids on the GPU
// (spec section 6; the rules of reference/expand.hpp, bit for bit).
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/expand/expand_validate.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

// One block per row. Inputs must have passed validate_expand on the host;
// the kernel reads no memory through a block id, so it stays in bounds
// whatever the ids are.
//   block_ids: [T, K / r] int32, valid prefix then -1 (entries after the
//              first -1 are ignored)
//   pos:       [T] int64, request-relative position p, -1 for padding rows
//   token_idx: [T, p.width()] int32 output; with p.count_column the last
//              column holds n_exp + n_tail (0 for padding rows)
void launch_expand(const ExpandParams& p, int64_t num_tokens, const int32_t* block_ids, const int64_t* pos,
                   int32_t* token_idx, hipStream_t stream);

}  // namespace qsa::gpu
