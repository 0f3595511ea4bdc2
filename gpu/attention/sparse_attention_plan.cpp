#include "gpu/attention/sparse_attention_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "reference/core/errors.hpp"

namespace qsa::gpu {

SparseAttentionPrefillShape sparse_attention_prefill_shape(const AttentionParams& p) {
  if (p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    throw InputError(fmt::format("gpu attention: heads = {} and kv_heads = {} must be positive with kv_heads "
                                 "dividing heads",
                                 p.heads, p.kv_heads));
  SparseAttentionPrefillShape s;
  const int group = p.heads / p.kv_heads;
  s.heads = std::min(group, kAttentionPrefillMaxPairs);
  s.head_chunks = (group + s.heads - 1) / s.heads;
  s.rows = std::clamp(kAttentionPrefillMaxPairs / s.heads, 1, kAttentionPrefillMaxRows);
  s.pairs = s.rows * s.heads;
  return s;
}

namespace {

// Appends the entries of one tile: the multiset union of its rows' attended
// ids (row r's ids, tagged r, in `tagged`), copy k of an id carrying the rows
// that list it more than k times.
void append_union(std::vector<std::pair<int32_t, int>>& tagged, SparseAttentionPrefillPlan& plan) {
  std::sort(tagged.begin(), tagged.end());
  for (size_t i = 0; i < tagged.size();) {
    const int32_t id = tagged[i].first;
    std::array<int, kAttentionPrefillMaxRows> count{};
    int copies = 0;
    for (; i < tagged.size() && tagged[i].first == id; ++i)
      copies = std::max(copies, ++count[static_cast<size_t>(tagged[i].second)]);
    for (int k = 0; k < copies; ++k) {
      uint32_t mask = 0;
      for (int r = 0; r < kAttentionPrefillMaxRows; ++r)
        if (count[static_cast<size_t>(r)] > k) mask |= 1u << r;
      plan.ids.push_back(id);
      plan.masks.push_back(mask);
      plan.row_ids += __builtin_popcount(mask);
    }
  }
}

}  // namespace

SparseAttentionPrefillPlan plan_sparse_attention_prefill(const AttentionParams& p, const SparseAttentionDims& dims,
                                                         const TensorI32& token_idx,
                                                         const std::vector<int32_t>& token_to_req,
                                                         const std::vector<int32_t>& seq_lens,
                                                         const TensorI32& block_table) {
  const SparseAttentionPrefillShape shape = sparse_attention_prefill_shape(p);
  const int64_t T = dims.num_tokens;
  require_shape(token_idx, {T, p.index_width}, "gpu attention prefill plan: token_idx");
  if (static_cast<int64_t>(token_to_req.size()) != T || static_cast<int64_t>(seq_lens.size()) != dims.num_reqs ||
      block_table.rank() != 2 || block_table.dim(0) != dims.num_reqs || block_table.dim(1) != dims.max_pages)
    throw InputError(fmt::format("gpu attention prefill plan: token_to_req ({} entries), seq_lens ({}) or "
                                 "block_table {} disagree with the validated dims (T = {}, R = {}, max_pages = {})",
                                 token_to_req.size(), seq_lens.size(), shape_to_string(block_table.shape), T,
                                 dims.num_reqs, dims.max_pages));
  SparseAttentionPrefillPlan plan;
  plan.rows_per_tile = shape.rows;
  const int64_t width = p.index_width;
  std::vector<std::pair<int32_t, int>> tagged;
  for (int64_t t0 = 0; t0 < T;) {
    const int32_t req = token_to_req[t0];
    int n = 1;
    while (t0 + n < T && n < shape.rows && token_to_req[t0 + n] == req) ++n;
    const int64_t first_entry = plan.num_entries();
    if (req >= 0 && req < dims.num_reqs) {
      tagged.clear();
      const int64_t L = seq_lens[req];
      for (int r = 0; r < n; ++r) {
        const int32_t* ids = token_idx.row(t0 + r);
        // The count column bounds the row exactly as the reference clamps it.
        const int64_t cols = attended_columns(ids, width, p.count_column);
        for (int64_t c = 0; c < cols; ++c) {
          const int32_t id = ids[c];
          if (id < 0 || id >= L) continue;
          const int64_t page = id / p.page_size;
          if (page >= dims.max_pages || block_table.at(req, page) < 0) continue;
          tagged.emplace_back(id, r);
        }
      }
      append_union(tagged, plan);
    }
    const int64_t entries = plan.num_entries() - first_entry;
    if (plan.num_entries() > std::numeric_limits<int32_t>::max())
      throw InputError(fmt::format("gpu attention prefill plan: more than 2^31 - 1 entries by row {}; split the "
                                   "launch",
                                   t0));
    plan.tiles.insert(plan.tiles.end(), {static_cast<int32_t>(t0), n, static_cast<int32_t>(first_entry),
                                         static_cast<int32_t>(entries)});
    t0 += n;
  }
  return plan;
}

}  // namespace qsa::gpu
