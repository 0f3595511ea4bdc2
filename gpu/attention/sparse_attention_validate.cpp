#include "gpu/attention/sparse_attention_validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

void check_sparse_attention_params(const AttentionParams& p, const KvCacheParams& kv) {
  if (p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    throw InputError(fmt::format("gpu attention: heads = {} and kv_heads = {} must be positive with kv_heads "
                                 "dividing heads",
                                 p.heads, p.kv_heads));
  if (!supported_head_dim(p.head_dim))
    throw ConfigError(fmt::format("gpu attention: head_dim = {} has no kernel (supported: 32, 64, 128, 256)",
                                  p.head_dim));
  if (p.page_size <= 0) throw InputError(fmt::format("gpu attention: page_size = {} must be positive", p.page_size));
  if (p.index_width < 0 || (p.count_column && p.index_width < 1))
    throw InputError(fmt::format("gpu attention: index_width = {} leaves no room for the count column",
                                 p.index_width));
  if (p.octave_shadow)
    throw ConfigError("gpu attention: Octave shadow copies are not implemented in the kernel");
  if (kv.dtype != KvDtype::kBf16 && kv.dtype != KvDtype::kFp8)
    throw ConfigError(fmt::format("gpu attention: KV dtype {} has no kernel (supported: bf16, fp8)",
                                  to_string(kv.dtype)));
  if (kv.kv_heads != p.kv_heads || kv.head_dim != p.head_dim || kv.page_size != p.page_size)
    throw InputError(fmt::format("gpu attention expects G = {}, D = {}, page size {} but the main KV cache has "
                                 "G = {}, D = {}, page size {}",
                                 p.kv_heads, p.head_dim, p.page_size, kv.kv_heads, kv.head_dim, kv.page_size));
  if (kv.num_pages < 0) throw InputError(fmt::format("gpu attention: num_pages = {} is negative", kv.num_pages));
  if (kv.dtype == KvDtype::kFp8)
    for (double s : {kv.k_scale, kv.v_scale})
      if (!(s > 0) || !std::isfinite(s))
        throw ConfigError(fmt::format("gpu attention: fp8 KV scale {} must be positive and finite", s));
}

SparseAttentionDims validate_sparse_attention(const AttentionParams& p, const KvCacheParams& kv,
                                              const TensorI32& token_idx,
                                              const std::vector<int32_t>& token_to_req,
                                              const std::vector<int32_t>& seq_lens, const TensorI32& block_table,
                                              TokenIdCheck ids) {
  check_sparse_attention_params(p, kv);
  SparseAttentionDims dims;
  dims.num_tokens = static_cast<int64_t>(token_to_req.size());
  dims.num_reqs = static_cast<int>(seq_lens.size());
  dims.num_pages = kv.num_pages;
  require_shape(token_idx, {dims.num_tokens, p.index_width}, "gpu attention token_idx");
  if (block_table.rank() != 2 || block_table.dim(0) != dims.num_reqs)
    throw InputError(fmt::format("gpu attention block_table has shape {}, expected [{}, max_pages]",
                                 shape_to_string(block_table.shape), dims.num_reqs));
  dims.max_pages = static_cast<int>(block_table.dim(1));
  for (int64_t i = 0; i < block_table.dim(0); ++i)
    for (int64_t j = 0; j < block_table.dim(1); ++j) {
      const int32_t v = block_table.at(i, j);
      if (v < -1 || v >= kv.num_pages)
        throw InputError(fmt::format("gpu attention: block_table[{}, {}] = {} is out of range (cache has {} pages; "
                                     "-1 marks an unmapped page)",
                                     i, j, v, kv.num_pages));
    }
  for (int i = 0; i < dims.num_reqs; ++i)
    if (seq_lens[i] < 0) throw InputError(fmt::format("gpu attention: seq_lens[{}] = {} is negative", i, seq_lens[i]));
  for (int64_t t = 0; t < dims.num_tokens; ++t)
    if (token_to_req[t] < -1 || token_to_req[t] >= dims.num_reqs)
      throw InputError(fmt::format("gpu attention: token_to_req[{}] = {} is out of range ({} requests; -1 marks "
                                   "a padding row)",
                                   t, token_to_req[t], dims.num_reqs));
  if (ids == TokenIdCheck::kStrict) {
    const int64_t width = p.index_width;
    for (int64_t t = 0; t < dims.num_tokens; ++t) {
      const int32_t* row = token_idx.row(t);
      int64_t n = width;
      if (p.count_column) {
        n = row[width - 1];
        if (n < 0 || n > width - 1)
          throw InputError(fmt::format("gpu attention: token_idx[{}, {}] (the count column) = {} is outside "
                                       "[0, {}]",
                                       t, width - 1, n, width - 1));
      }
      const int req = token_to_req[t];
      const int64_t L = req >= 0 ? seq_lens[req] : 0;
      for (int64_t c = 0; c < n; ++c)
        if (row[c] < -1 || row[c] >= L)
          throw InputError(fmt::format("gpu attention: token_idx[{}, {}] = {} is outside [-1, {}) ({})", t, c,
                                       row[c], L,
                                       req >= 0 ? fmt::format("seq_len of request {}", req)
                                                : std::string("a padding row holds only -1")));
    }
  }
  return dims;
}

int sparse_attention_splits(const AttentionParams& p, int ids_per_split) {
  if (ids_per_split <= 0 || ids_per_split % kSparseAttentionSplitGrain != 0)
    throw InputError(fmt::format("gpu attention: ids_per_split = {} must be a positive multiple of {}",
                                 ids_per_split, kSparseAttentionSplitGrain));
  const int cols = sparse_attention_columns(p);
  return std::max(1, (cols + ids_per_split - 1) / ids_per_split);
}

size_t sparse_attention_workspace_floats(const AttentionParams& p, const SparseAttentionDims& dims,
                                         int ids_per_split) {
  const int splits = sparse_attention_splits(p, ids_per_split);
  size_t floats = splits == 1 ? 0
                              : static_cast<size_t>(dims.num_tokens) * static_cast<size_t>(p.heads) *
                                    static_cast<size_t>(splits) * (static_cast<size_t>(p.head_dim) + 2);
  if (dims.num_tokens * p.kv_heads <= kSpreadDecodeMaxPairs) {
    const int cols = sparse_attention_columns(p);
    const size_t blocks = static_cast<size_t>(std::max(1, (cols + kSpreadIdsPerBlock - 1) / kSpreadIdsPerBlock));
    floats = std::max(floats, blocks * spread_workspace_floats_per_block(p, dims.num_tokens));
  }
  return floats;
}

size_t spread_workspace_floats_per_block(const AttentionParams& p, int64_t rows) {
  if (rows < 1) return 0;
  return static_cast<size_t>(rows) * static_cast<size_t>(p.heads) * (static_cast<size_t>(p.head_dim) + 2);
}

int sparse_attention_ids_per_split(const AttentionParams& p, const SparseAttentionDims& dims) {
  if (dims.num_tokens <= kSplitKMaxRows) return kDefaultIdsPerSplit;
  const int cols = std::max(1, sparse_attention_columns(p));
  return (cols + kSparseAttentionSplitGrain - 1) / kSparseAttentionSplitGrain * kSparseAttentionSplitGrain;
}

void validate_token_slots(const AttentionParams& p, const KvCacheParams& kv, const TensorI32& token_idx,
                          const std::vector<int32_t>& token_to_req, const std::vector<int32_t>& seq_lens,
                          const TensorI32& block_table, const TensorI32& token_slots) {
  require_shape(token_slots, token_idx.shape, "token_slots");
  TensorI32 expected;
  qsa::token_slots(token_idx, p.count_column, token_to_req, seq_lens, block_table, p.page_size, kv.num_pages,
                   expected);
  const int64_t W = token_idx.dim(1);
  for (size_t i = 0; i < expected.data.size(); ++i)
    if (token_slots.data[i] != expected.data[i]) {
      const int64_t row = static_cast<int64_t>(i) / W, col = static_cast<int64_t>(i) % W;
      throw InputError(fmt::format("token_slots[{}, {}] is {}, but token id {} of that row {} (reference "
                                   "token_slots: the slot attention reads, or -1 where it reads none)",
                                   row, col, token_slots.data[i], token_idx.data[i],
                                   p.count_column && col == W - 1
                                       ? fmt::format("is the count column, {}", expected.data[i])
                                       : fmt::format("gives slot {}", expected.data[i])));
    }
}

}  // namespace qsa::gpu
