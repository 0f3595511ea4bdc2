// Host mirrors of what the GPU step driver's device caches hold: the logical
// position (main KV, ring) or block id (compressed cache) last written at
// each slot, -1 when never written. The reference keeps the same tags next to
// its values (reference/kv_cache.hpp, side_caches.hpp) and throws InputError
// when a step reads an entry it does not hold; the GPU driver runs the same
// checks on these mirrors before each launch, so a trace that reads stale or
// missing cache entries fails with the reference's message instead of
// attending to poison.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::gpu {

struct CacheTags {
  std::vector<int64_t> kv;          // [num_pages · P] position held by each main KV slot
  std::vector<int64_t> ring;        // [num_ring_blocks · C] position held by each ring slot
  std::vector<int64_t> compressed;  // [num_pages · P/r] block id held by each compressed row
  int page_size = 0;                // P
  int rows_per_page = 0;            // P / r
  int ratio = 0;                    // r

  CacheTags(const CacheGeometry& g, int page_size, int ratio, int ring_capacity);

  // Records the step's writes: K/V at main_slot, pooled groups at
  // compressed_slot, raw keys at ring_slot (call after the prepare launch's
  // checks, which read the ring as it stood before the step).
  void record_step(const StepLayout& l);

  // InputError, as gather_compressed_keys words it, when a visible block of
  // some real row has an unmapped page or a compressed row holding another
  // block.
  void check_selection_reads(const StepLayout& l) const;

  // InputError, as the reference attention words it, when a counted id in
  // [0, L) of a real row maps to a slot that does not hold it. token_idx is
  // [T, width] with the count column last when count_column.
  void check_attention_reads(const StepLayout& l, const TensorI32& token_idx, bool count_column) const;
};

}  // namespace qsa::gpu
