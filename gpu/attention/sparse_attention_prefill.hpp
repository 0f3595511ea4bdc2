// Internal interface between the launcher (sparse_attention.hip) and the
// prefill kernel (sparse_attention_prefill.hip). Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/attention/attention_prefill_tile.hpp"
#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/common/device_api.hpp"

namespace qsa::gpu::attn {

// Launches the prefill kernel over pa.tiles' tiles: grid x = tile, y = KV
// group * shape.head_chunks + chunk. pa must be complete and checked.
void launch_prefill(const PrefillArgs& pa, const SparseAttentionPrefillShape& shape, int64_t num_tiles, int head_dim,
                    bool fp8, hipStream_t stream);

}  // namespace qsa::gpu::attn
