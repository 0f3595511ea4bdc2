// Expansion of selected block ids to request-relative token ids on the GPU
// (spec section 6; the rules of reference/expand.hpp, bit for bit).
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/expand/expand_validate.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

// What expand needs to write each id's main-cache slot beside it: the
// attention's inputs of the same rows (SparseAttentionArgs). The slots are
// reference token_slots of the ids written (reference/core/step_layout.hpp);
// the kernel checks every request, page and table entry against these sizes,
// so it stays in bounds whatever the metadata holds.
struct ExpandSlots {
  const int32_t* token_to_req = nullptr;  // [T], -1 for padding rows
  const int32_t* seq_lens = nullptr;      // [num_reqs]
  const int32_t* block_table = nullptr;   // [num_reqs, max_pages], -1 = unmapped page
  int num_reqs = 0, max_pages = 0, page_size = 0;
  int64_t num_pages = 0;                  // pages of the main cache
  int32_t* token_slots = nullptr;         // [T, p.width()] output
};

// One block per row. Inputs must have passed validate_expand on the host;
// the kernel reads no memory through a block id, so it stays in bounds
// whatever the ids are.
//   block_ids: [T, K / r] int32, valid prefix then -1 (entries after the
//              first -1 are ignored)
//   pos:       [T] int64, request-relative position p, -1 for padding rows
//   token_idx: [T, p.width()] int32 output; with p.count_column the last
//              column holds n_exp + n_tail (0 for padding rows)
//   slots:     null, or where to write the slots too (ConfigError for a
//              page size below 1 or a cache whose slots overflow int32,
//              InputError for a null pointer or negative sizes)
void launch_expand(const ExpandParams& p, int64_t num_tokens, const int32_t* block_ids, const int64_t* pos,
                   int32_t* token_idx, hipStream_t stream, const ExpandSlots* slots = nullptr);

}  // namespace qsa::gpu
