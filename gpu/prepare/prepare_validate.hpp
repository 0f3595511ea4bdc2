// Host-side validation of the prepare stage's inputs, kept apart from the
// launcher so it compiles without any GPU runtime header. The kernel cannot
// throw, so everything it follows through an index is checked here first.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/prepare/prepare_params.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

// Checks the host layout of one step against the params (check_prepare_params
// first: ConfigError) and the host mirror of the ring's position tags
// (ring_tags: [ring blocks * C], the position each ring slot holds, -1 when
// never written). Throws InputError naming the tensor, row and value:
//  - shapes: token_to_req, pos, main_slot, ring_slot, compressed_slot [T],
//    rope_pos [3, T], starts [R + 1] (0, strictly increasing, <= T),
//    ring_blocks [R] (distinct, each block inside the ring);
//  - real rows (t < starts[R]) belong to the request whose range holds them,
//    with consecutive positions pos[t] = pos[starts[i]] + (t - starts[i]) >= 0
//    and non-negative rope positions; rows from starts[R] on are padding
//    (token_to_req = -1; their slots are ignored);
//  - main_slot of real rows in [0, pages * P) and distinct;
//  - ring_slot exactly as derive_step_layout sets it: ring_blocks[i] * C +
//    p mod C for the last C rows of request i, -1 elsewhere (the kernel's
//    race-freedom argument rests on it, see prepare.hip);
//  - compressed_slot -1 unless (p + 1) mod r == 0, in [0, pages * P / r) and
//    distinct where set;
//  - a group straddling the step's start of request i (completed in this
//    step, first members in earlier steps) finds every older member in the
//    ring: ring_tags[ring_blocks[i] * C + q mod C] == q, else the member was
//    never written or overwritten, worded as the reference's ring read.
void validate_prepare(const PrepareParams& p, const StepLayout& l, const std::vector<int64_t>& ring_tags);

}  // namespace qsa::gpu
