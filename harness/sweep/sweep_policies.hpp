// Block rankings of the sweep's selection policies for one query row. Each
// returns at most `max_blocks` distinct visible blocks (ids < visible), best
// first, and never depends on the budget: a budget of K_B blocks takes the
// first min(K_B, visible), so every policy's selections are nested.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/rng.hpp"

namespace qsa {

// The indexer's own canonical top-k row (valid prefix, then -1).
std::vector<int32_t> indexer_order(const int32_t* block_ids, int width, int max_blocks);

// Blocks ranked by head-summed pooled dense attention: Σ_h max_{t in b} P_h(t)
// (max_pool) or Σ_h Σ_{t in b} P_h(t); descending, ties to the lower id.
// probs: [heads, n] rows of P_h over tokens 0..n-1.
std::vector<int32_t> oracle_order(const double* probs, int heads, int64_t n, int ratio, int32_t visible, bool max_pool,
                                  int max_blocks);

// The blocks holding the first `sinks` tokens, then the most recent blocks
// (visible - 1, visible - 2, ...): the expanded row adds the open group's
// tail, so the selection is sinks plus a recent window.
std::vector<int32_t> window_order(int32_t visible, int ratio, int sinks, int max_blocks);

// The first max_blocks entries of a uniformly random permutation of the
// visible blocks (a partial Fisher-Yates shuffle drawn from rng).
std::vector<int32_t> random_order(int32_t visible, int max_blocks, const CounterRng& rng);

}  // namespace qsa
