// Pooling of completed groups into compressed keys (spec section 4).
//
// At a token with (p + 1) mod r == 0, group b = p div r is complete:
//   pooled = bf16(mean(raw_key[b·r .. b·r + r - 1]))
//   k_c[b] = quant(RoPE(bf16(norm_k(pooled)), rope position of token b·r))
// Members in this step's chunk come from its raw keys; older members (a group
// straddling a chunk boundary) come from the ring as it stood before this
// step: pooling runs before the step's ring writes, so a long chunk cannot
// overwrite the members it needs. All rows completed in a step are written
// before any selection in that step, so a query can see the block it
// completed itself.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/stage_params.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"
#include "reference/side_caches.hpp"
#include "reference/stage_record.hpp"

namespace qsa {

// The compressed rows one step wrote, for diffing against an engine.
struct CompressedRows {
  std::vector<int32_t> token;  // [n] row whose token completed the group
  std::vector<int64_t> block;  // [n] group b, request-relative
  std::vector<int64_t> slot;   // [n] compressed-cache row
  TensorD keys;                // [n, d_I] stored values
};

// Value after the indexer-dtype store: bf16 (when storage rounding is on) or
// fp8 e4m3 without scale. Shared by the indexer Q and the compressed keys.
double quantize_indexer(const CompressParams& p, double x);

// raw_keys: [T, d_I] (bf16 projection outputs); k_norm: [d_I].
CompressedRows compress_completed_groups(const CompressParams& p, const RmsNormParams& norm,
                                         const RopeParams& rope, const TensorD& k_norm,
                                         const StepLayout& layout, const TensorD& raw_keys,
                                         const RawKeyRing& ring, CompressedCache& cache);

// Isolated replay: writes a producer's recorded compressed rows (keys at
// their recorded slots and block ids) over the ones the step computed.
void overwrite_compressed_rows(const StageRecord& recorded, CompressedCache& cache);

// Writes the last C raw keys of each request (layout.ring_slot >= 0).
void write_ring(const StepLayout& layout, const TensorD& raw_keys, RawKeyRing& ring);

// The request's compressed keys for blocks [0, n_blocks) as a dense
// [n_blocks, d_I] matrix; InputError when a visible block's row is unmapped
// or holds another block (never written or stale).
TensorD gather_compressed_keys(const StepLayout& layout, int req, int64_t n_blocks,
                               const CompressedCache& cache);

}  // namespace qsa
