// The prefill path of the sparse attention launcher: its tile shape, the
// host-built plan it reads, and the path switch. Host code only (no GPU
// runtime header), like sparse_attention_validate.hpp.
//
// Three kernels read the plan. On NVIDIA, for a bf16 cache with P rounded
// to bf16 (the engines' case), a tensor-core prefill kernel
// (sparse_attention_mma.hpp: the tile's (row, head) pairs as m16 tiles, the
// decode kernel's numerics per pair), in its Hopper (wgmma) version where
// the build and device have it, else its sm_80 one. Everywhere else the
// portable one:
//
// Prefill kernel (sparse_attention_prefill.hip): one thread block per (tile,
// KV group g, chunk of the group's query heads). A tile is up to `rows`
// consecutive rows of ONE request (padding rows form tiles of their own).
// The block walks the tile's entries: the sorted multiset union of the ids
// its rows attend, each entry with a bit mask of the rows that attend it.
// Each entry's K and V rows are read once for all (row, head) pairs of the
// block, 32 entries per shared-memory tile:
//   logits  8 threads per entry, each pair's QK dot in fp32 in the decode
//           kernel's order (so the same fp32 logit), times D^-1/2 (with
//           p.round_logits bf16(bf16(QK) * scale)); -inf where the row does
//           not attend the entry;
//   softmax one wave per pair: online max and sum in fp32, P = exp(S - m)
//           rounded to bf16 with kBf16Unnormalized (the sum stays unrounded);
//   PV      threads over (pair group, 4 dims): acc = acc * alpha + sum P V.
// The epilogue is the decode kernel's (A, optionally bf16, and
// O = bf16(A * sigmoid(gate))). There is no split-K: long rows are fine
// because a prefill launch has many tiles.
//
// Duplicates: the reference attends an id as often as a row lists it (each
// copy is one softmax term). The plan keeps that: an id appears m times in a
// tile's entries, m being the largest multiplicity among its rows, and copy
// k carries the rows that list it more than k times. So a row that lists an
// id c times gets c equal terms on both paths, and no launch has to fall
// back to the decode path.
//
// What the caller uploads: the plan's three arrays (tiles, ids, masks) as
// SparseAttentionArgs::prefill_* (see sparse_attention.hpp). The plan only
// holds ids the reference attends (in [0, L), within the count column's
// bound, on a mapped page), but the kernel resolves every id again and
// skips what it cannot attend, so a stale plan cannot make it read out of
// bounds (it can only give wrong numbers).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/attention/sparse_attention_validate.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::gpu {

// Which kernel launch_sparse_attention runs. kAuto takes the prefill path when
// the caller passed a plan whose tiles hold on average at least
// kAttentionPrefillMinRowsPerTile rows (num_tokens / tiles): then each K/V
// row a tile loads serves about that many rows, against the split-K
// parallelism the decode kernel has for a few long rows. Without a plan, or
// for decode batches (one row per request: one row per tile), the decode
// kernel. The threshold is a reasoned default, not yet tuned on a GPU. With
// the params and KV dtype (resolve_attention_path(p, kv, ...)), where the
// decode kernel is the tensor-core one, kAuto also needs a tensor-core
// prefill kernel for them and the plan's reuse (kAttentionPrefillMinReuse,
// kAttentionPrefillMinReuseHopper).
// kDecode runs the best decode kernel the build has (the tensor-core one of
// sparse_attention_mma.hpp where it applies: for a few rows the
// spread kernel, else the split-K one); kDecodePortable forces the portable
// decode kernel, kDecodeSplitK the split-K tensor-core kernel (kDecode
// without the spread kernel), kDecodeSpread the spread kernel (a
// ConfigError where it cannot run), so that tests and benchmarks can hold
// the kernels against each other.
// kPrefill runs the fastest prefill kernel the build and device have (on an
// H200 the Hopper one of sparse_attention_mma.hpp); kPrefillMmaSync the same
// path without the Hopper kernel, so that tests and benchmarks reach the
// sm_80 tensor-core prefill kernel on a Hopper GPU too.
enum class AttentionPath { kAuto, kDecode, kDecodePortable, kPrefill, kPrefillMmaSync, kDecodeSplitK, kDecodeSpread };

// Whether a path is one of the prefill kernels'.
constexpr bool is_prefill_path(AttentionPath p) {
  return p == AttentionPath::kPrefill || p == AttentionPath::kPrefillMmaSync;
}
inline constexpr int64_t kAttentionPrefillMinRowsPerTile = 4;

// With the params, on a build whose decode kernel is the tensor-core one,
// kAuto takes the prefill path only where the plan's rows share their
// selections: at least this many attended (row, id) pairs per entry the
// tiles load (plan.row_ids / plan.num_entries(), passed as
// SparseAttentionArgs::prefill_row_ids), a threshold per union kernel
// (sparse_attention_prefill_min_reuse picks the one that applies).
// Measured on the H200 at the model's shape (docs/performance.md,
// twentieth and twenty-first passes): the decode kernel's time does not
// depend on what the rows share; the Hopper union kernel overtakes it near
// reuse 1.12 (8K-row chunk at 32K context), 1.30 (2K rows) and 1.42 (512
// rows), and is 16% or more faster at 1.75 on all three (at 4K context it
// was faster at every reuse measured, 2.15 and up); the sm_80 union kernel
// overtook it at 2.8 (8K rows at 32K, the one shape measured for it, before
// the twenty-first pass made it 15% faster). Each threshold sits at or
// above its kernel's crossings, so kAuto never takes a union kernel where it
// was measured slower.
inline constexpr double kAttentionPrefillMinReuseHopper = 1.5;
inline constexpr double kAttentionPrefillMinReuse = 3.0;  // the sm_80 kernel

// Limits of the prefill kernel: rows per tile (one mask bit each), (row,
// head) pairs per block (shared memory: the pairs' bf16 queries; registers:
// their accumulators), entries per shared-memory tile.
inline constexpr int kAttentionPrefillMaxRows = 16;
inline constexpr int kAttentionPrefillMaxPairs = 64;
inline constexpr int kAttentionPrefillEntries = 32;

// Heads per block (a chunk of the H/G heads of a group, as many as fit),
// blocks per group, rows per tile and (row, head) pairs per block:
// H/G = 12 gives 12 heads and 5 rows; H/G = 4 gives 4 heads and 16 rows.
struct SparseAttentionPrefillShape {
  int heads = 1;
  int head_chunks = 1;
  int rows = 1;
  int pairs = 1;
};
SparseAttentionPrefillShape sparse_attention_prefill_shape(const AttentionParams& p);

// The host-built input of the prefill kernel.
struct SparseAttentionPrefillPlan {
  int rows_per_tile = 0;          // sparse_attention_prefill_shape(p).rows
  std::vector<int32_t> tiles;     // [num_tiles, 4]: first row, rows, first entry, entries
  std::vector<int32_t> ids;       // [num_entries] request-relative token ids, ascending per tile
  std::vector<uint32_t> masks;    // [num_entries] bit r: row (first row + r) attends this entry
  int64_t row_ids = 0;            // (row, entry) pairs attended: the masks' set bits, summed
  int64_t num_tiles() const { return static_cast<int64_t>(tiles.size() / 4); }
  int64_t num_entries() const { return static_cast<int64_t>(ids.size()); }
};

// Builds the plan from the host copies that passed validate_sparse_attention
// (which returned `dims`). Every row lies in exactly one tile, so the kernel
// writes every output; the tiles of padding rows have no entries. Throws
// InputError for inputs whose shapes disagree with dims, or a plan past
// 2^31 - 1 entries.
SparseAttentionPrefillPlan plan_sparse_attention_prefill(const AttentionParams& p, const SparseAttentionDims& dims,
                                                         const TensorI32& token_idx,
                                                         const std::vector<int32_t>& token_to_req,
                                                         const std::vector<int32_t>& seq_lens,
                                                         const TensorI32& block_table);

}  // namespace qsa::gpu
