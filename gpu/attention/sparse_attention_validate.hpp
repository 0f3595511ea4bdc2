// Host-side checks for the sparse attention launcher, kept apart from it so
// they compile without any GPU runtime header.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::gpu {

// Sizes the launcher needs besides the params; validate_sparse_attention
// derives them from the host copies of the inputs.
struct SparseAttentionDims {
  int64_t num_tokens = 0;  // T: rows of q, token_idx, outputs
  int num_reqs = 0;        // R: entries of seq_lens, rows of block_table
  int max_pages = 0;       // columns of block_table
  int64_t num_pages = 0;   // pages of the main KV cache (kv.num_pages)
};

// How token ids are checked. The reference ignores ids outside [0, L)
// (docs/semantics.md section 8), so kLenient accepts any int32 id and the
// kernel skips the ones it cannot attend, exactly as the reference does.
// kStrict additionally rejects ids outside [-1, L) in the counted columns of
// real rows and a count column outside [0, width - 1]: no correct expand
// stage produces them, so a strict check catches a corrupted trace early.
enum class TokenIdCheck { kLenient, kStrict };

// Head dims with a compiled kernel.
inline bool supported_head_dim(int d) { return d == 32 || d == 64 || d == 128 || d == 256; }

// Params the kernel implements: ConfigError for what it does not (head_dim
// outside {32, 64, 128, 256}, Octave KV or its shadow copies), InputError
// for params that contradict each other. Every p_rounding is implemented
// (bf16-normalised P on the decode path only).
void check_sparse_attention_params(const AttentionParams& p, const KvCacheParams& kv);

// Checks host copies of the index inputs and returns the launch sizes:
//   token_idx:    [T, p.index_width]
//   token_to_req: [T], each in [-1, R)
//   seq_lens:     [R], each >= 0
//   block_table:  [R, max_pages], each in [-1, kv.num_pages)
// Throws InputError naming the tensor, row and column of the first problem.
SparseAttentionDims validate_sparse_attention(const AttentionParams& p, const KvCacheParams& kv,
                                              const TensorI32& token_idx,
                                              const std::vector<int32_t>& token_to_req,
                                              const std::vector<int32_t>& seq_lens, const TensorI32& block_table,
                                              TokenIdCheck ids = TokenIdCheck::kLenient);

// Checks host copies of SparseAttentionArgs::token_slots ([T, p.index_width])
// against the slots reference token_slots derives from the inputs above
// (reference/core/step_layout.hpp): a kernel that reads slots instead of ids
// must attend exactly what the ids say. Call after validate_sparse_attention.
// InputError naming the row, the column, the slot given and the one expected.
void validate_token_slots(const AttentionParams& p, const KvCacheParams& kv, const TensorI32& token_idx,
                          const std::vector<int32_t>& token_to_req, const std::vector<int32_t>& seq_lens,
                          const TensorI32& block_table, const TensorI32& token_slots);

// Split-K: a row's counted columns are cut into chunks of ids_per_split
// (a positive multiple of kSparseAttentionSplitGrain) handled by separate
// blocks and merged by log-sum-exp. One chunk means no merge and no
// workspace. The portable kernel uses exactly these chunks; the tensor-core
// kernel takes fewer, longer ones when the batch alone fills the GPU, so the
// workspace (sized for ids_per_split) bounds its split count. The default
// is small so that a single decode row can still spread over ~66 blocks.
inline constexpr int kSparseAttentionTile = 128;  // ids per tile of the portable kernel
// Columns of a token_idx row that hold ids (the count column excluded),
// the length split-K divides.
inline int sparse_attention_columns(const AttentionParams& p) {
  const int n = p.index_width - (p.count_column ? 1 : 0);
  return n > 0 ? n : 0;
}
inline constexpr int kSparseAttentionSplitGrain = 32;
inline constexpr int kDefaultIdsPerSplit = 64;
int sparse_attention_splits(const AttentionParams& p, int ids_per_split = kDefaultIdsPerSplit);
// The spread decode kernel (sparse_attention_mma.hpp) runs under kAuto for
// at most kSpreadDecodeMaxPairs (row, KV group) pairs, in blocks of at least
// kSpreadIdsPerBlock ids each, its partials in the workspace.
inline constexpr int64_t kSpreadDecodeMaxPairs = 2;
inline constexpr int kSpreadIdsPerBlock = 32;
// Floats of workspace a launch needs: per (row, head, split) D
// accumulators plus the running max and sum (with bf16-normalised P: the
// split's partial PV sum and its softmax max and sum). The splits are
// ceil(columns / ids_per_split), 0 floats with one; for at most
// kSpreadDecodeMaxPairs pairs, at least what the spread kernel's blocks
// take (ceil(columns / kSpreadIdsPerBlock) of them, at least one).
size_t sparse_attention_workspace_floats(const AttentionParams& p, const SparseAttentionDims& dims,
                                         int ids_per_split = kDefaultIdsPerSplit);
// Floats of workspace one spread block per (row, KV group) takes over
// `rows` rows: per (row, head) D sums and (m, l).
size_t spread_workspace_floats_per_block(const AttentionParams& p, int64_t rows);
// The ids_per_split a caller without its own policy should use:
// kDefaultIdsPerSplit up to kSplitKMaxRows rows, one split per row above
// (then the rows alone fill the GPU and the workspace, which grows with
// rows x splits, is empty: 8192 prefill rows would otherwise need GBs).
inline constexpr int64_t kSplitKMaxRows = 128;
int sparse_attention_ids_per_split(const AttentionParams& p, const SparseAttentionDims& dims);

}  // namespace qsa::gpu
