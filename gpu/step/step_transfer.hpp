// Host <-> device traffic of the GPU step driver: the layer weights in bf16,
// one step's device buffers (layout, activations, outputs), and turning the
// device results back into the reference's StepOutputs (fp64 tensors).
#pragma once

#include <cstdint>
#include <string>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/expand/expand.hpp"
#include "gpu/prepare/prepare.hpp"
#include "gpu/step/device_caches.hpp"
#include "reference/step_driver.hpp"
#include "reference/weights.hpp"

namespace qsa::gpu {

struct DeviceWeights {
  DeviceBuffer<uint16_t> index_qk;  // [(H_I + 1)·d_I, hidden] bf16 bits
  DeviceBuffer<uint16_t> q;         // [H·2D, hidden]
  DeviceBuffer<uint16_t> k;         // [G·D, hidden]
  DeviceBuffer<uint16_t> v;         // [G·D, hidden]
  DeviceBuffer<uint16_t> o;         // [hidden, H·D]
  DeviceBuffer<float> index_q_norm, index_k_norm;  // [d_I]
  DeviceBuffer<float> q_norm, k_norm;              // [D]
};

// Weights are bf16 in every engine; validate_weights has already run.
DeviceWeights upload_weights(const LayerWeights& w);

// InputError when an initial-state slot is outside its cache.
void check_slot(int64_t slot, size_t slots, const char* cache);

// Steps with at least this many rows per request on average attend through
// the prefill path (gpu/attention/sparse_attention_plan.hpp).
inline constexpr int kPrefillRowsPerRequest = 4;

// The prefill attention plan on the device; upload_prefill_plan points the
// launch arguments at it.
struct PrefillPlanBuffers {
  DeviceBuffer<int32_t> tiles, ids;
  DeviceBuffer<uint32_t> masks;
};
PrefillPlanBuffers upload_prefill_plan(const SparseAttentionPrefillPlan& plan, SparseAttentionArgs& args);

// The device buffers of one step, sized from its layout.
struct StepBuffers {
  StepBuffers(const QsaConfig& c, const StepLayout& l);

  // hidden [T, hidden_size] -> bf16 bits; rows at or past num_valid are zeros.
  void upload_hidden(const TensorD& hidden, int64_t num_valid);
  PrepareLayout prepare_layout(const DeviceCaches& caches) const;
  PrepareArgs prepare_args(const DeviceWeights& w, DeviceCaches& caches);
  SparseAttentionArgs attention_args(DeviceCaches& caches, DeviceBuffer<float>& workspace);
  TensorI32 download_token_idx(int width) const;
  // What launch_expand needs to write token_slots beside token_idx, for a
  // main cache of num_pages pages.
  ExpandSlots expand_slots(int64_t num_pages);
  TensorI32 download_token_slots(int width) const;
  // Fills every StepOutputs tensor except token_idx (already downloaded).
  void download_outputs(const DeviceCaches& caches, StepOutputs& o) const;

  const QsaConfig& c;
  const StepLayout& l;
  // layout, [T] unless noted
  DeviceBuffer<int32_t> token_to_req, visible;
  DeviceBuffer<int64_t> pos, main_slot, ring_slot, compressed_slot;
  DeviceBuffer<int64_t> rope_pos;                  // [3, T]
  DeviceBuffer<int32_t> starts;                    // [R + 1]
  DeviceBuffer<int32_t> seq_lens, ring_blocks;     // [R]
  DeviceBuffer<int32_t> block_table, block_table_c;  // [R, max_pages]
  // activations
  DeviceBuffer<uint16_t> hidden;                   // [T, hidden] bf16 bits
  DeviceBuffer<float> index_qk;                    // [T, (H_I + 1)·d_I]
  DeviceBuffer<float> qg;                          // [T, H·2D]
  DeviceBuffer<float> k_proj, v_proj;              // [T, G·D]
  DeviceBuffer<uint8_t> index_q;                   // [T, H_I, d_I] indexer codes
  DeviceBuffer<uint16_t> q, k, gate;               // [T, H, D], [T, G, D], [T, H, D] bf16 bits
  DeviceBuffer<int32_t> block_ids;                 // [T, K_B]
  DeviceBuffer<float> block_scores;                // [T, K_B]
  DeviceBuffer<int32_t> token_idx;                 // [T, width]
  DeviceBuffer<int32_t> token_slots;               // [T, width]: expand's slots of token_idx
  DeviceBuffer<float> attn;                        // [T, H, D]
  DeviceBuffer<uint16_t> gated;                    // [T, H, D] bf16 bits
  DeviceBuffer<float> out;                         // [T, hidden]
};

}  // namespace qsa::gpu
