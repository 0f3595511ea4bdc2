#include "reference/expand.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "reference/core/errors.hpp"

namespace qsa {

namespace {

void check_params(const ExpandParams& p, int blocks_budget) {
  if (p.ratio < 1 || p.budget < p.ratio || p.budget % p.ratio != 0)
    throw ConfigError(fmt::format("expand params need r >= 1 and a budget K that is a positive "
                                  "multiple of r (got r = {}, K = {})",
                                  p.ratio, p.budget));
  // More than K / r blocks would expand past the K columns reserved for them.
  if (blocks_budget < 0 || blocks_budget > p.budget / p.ratio)
    throw InputError(fmt::format("{} block slots per row, but K / r = {} / {} allows at most {}",
                                 blocks_budget, p.budget, p.ratio, p.budget / p.ratio));
}

// Length of the valid prefix. Ids past the first -1 are ignored (the prefix
// contract); a valid id must name a block completed at or before `pos`, since
// selection never sees any other. `row` < 0 when the caller has no row index.
int valid_prefix(const ExpandParams& p, const int32_t* blocks, int blocks_budget, int64_t pos,
                 int64_t row) {
  if (pos < 0) return 0;
  const int64_t completed = (pos + 1) / p.ratio;
  int n = 0;
  for (; n < blocks_budget && blocks[n] != -1; ++n) {
    if (blocks[n] < 0 || blocks[n] >= completed)
      throw InputError(fmt::format("block id {}{} (slot {}) is not a completed block at position {} "
                                   "({} blocks are complete, ratio {}); ids must be in [0, V) or -1",
                                   blocks[n], row >= 0 ? fmt::format(" in row {}", row) : "", n, pos,
                                   completed, p.ratio));
  }
  return n;
}

// Writes one row; inputs were already validated, so this never throws and
// can run inside a parallel region.
void fill_row(const ExpandParams& p, const int32_t* blocks, int n_blocks, int64_t pos, int32_t* out) {
  const int width = p.width();
  std::fill(out, out + width, -1);
  if (pos < 0) {
    if (p.count_column) out[width - 1] = 0;
    return;
  }
  const int r = p.ratio;
  const int n_exp = n_blocks * r;
  const int64_t t_start = ((pos + 1) / r) * r;
  const int n_tail = static_cast<int>(pos + 1 - t_start);
  for (int c = 0; c < n_exp; ++c) out[c] = blocks[c / r] * r + c % r;
  for (int c = 0; c < n_tail; ++c) out[n_exp + c] = static_cast<int32_t>(t_start + c);
  if (p.count_column) out[width - 1] = n_exp + n_tail;
}

}  // namespace

void expand_row(const ExpandParams& p, const int32_t* blocks, int blocks_budget, int64_t pos, int32_t* out) {
  check_params(p, blocks_budget);
  fill_row(p, blocks, valid_prefix(p, blocks, blocks_budget, pos, -1), pos, out);
}

void expand_rows(const ExpandParams& p, const TensorI32& block_ids, const std::vector<int64_t>& pos,
                 TensorI32& token_idx) {
  const int64_t T = static_cast<int64_t>(pos.size());
  const int blocks_budget = p.ratio >= 1 ? p.budget / p.ratio : 0;
  check_params(p, blocks_budget);
  require_shape(block_ids, {T, blocks_budget}, "block_ids");
  if (token_idx.empty()) {
    token_idx = TensorI32({T, p.width()}, -1);
  } else {
    require_shape(token_idx, {T, p.width()}, "token_idx");
  }
  std::vector<int> n_blocks(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    n_blocks[t] = valid_prefix(p, block_ids.row(t), blocks_budget, pos[t], t);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) fill_row(p, block_ids.row(t), n_blocks[t], pos[t], token_idx.row(t));
}

}  // namespace qsa
