#include "gpu/expand/expand_validate.hpp"

#include <fmt/format.h>

#include <limits>

#include "reference/core/errors.hpp"

namespace qsa::gpu {

void validate_expand(const ExpandParams& p, const TensorI32& block_ids, const std::vector<int64_t>& pos) {
  if (p.ratio < 1 || p.budget < p.ratio || p.budget % p.ratio != 0)
    throw ConfigError(fmt::format("gpu expand: need r >= 1 and a budget K that is a positive multiple of r "
                                  "(got r = {}, K = {})",
                                  p.ratio, p.budget));
  const int64_t T = static_cast<int64_t>(pos.size());
  const int blocks_budget = p.budget / p.ratio;
  require_shape(block_ids, {T, blocks_budget}, "gpu expand block_ids");
  for (int64_t t = 0; t < T; ++t) {
    if (pos[t] >= std::numeric_limits<int32_t>::max())
      throw InputError(fmt::format("gpu expand: pos[{}] = {} does not fit the int32 token ids", t, pos[t]));
    if (pos[t] < 0) continue;  // padding row: all -1, its ids are never read
    const int64_t completed = (pos[t] + 1) / p.ratio;
    const int32_t* row = block_ids.row(t);
    for (int s = 0; s < blocks_budget && row[s] != -1; ++s)
      if (row[s] < 0 || row[s] >= completed)
        throw InputError(fmt::format("gpu expand: block id {} in row {} (slot {}) is not a completed block at "
                                     "position {} ({} blocks are complete, ratio {}); ids must be in [0, V) "
                                     "or -1",
                                     row[s], t, s, pos[t], completed, p.ratio));
  }
}

}  // namespace qsa::gpu
