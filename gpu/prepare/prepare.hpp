// The fused "prepare" stage on the GPU: everything between the projections
// and the selection of one QSA layer step (spec sections 2-4 and 7;
// reference/step_driver.cpp steps 2-5), in one kernel launch:
//   - indexer Q: Gemma RMSNorm (index_q_norm), RoPE, indexer-dtype store;
//   - main Q and K: RMSNorm (q_norm / k_norm) and RoPE, stored as bf16; the
//     gate half of each q_proj head [Q | gate] copied out;
//   - K (normed, rotated) and V written to the main KV cache at main_slot;
//   - every group completed in the step pooled from its raw keys (older
//     members of a group straddling the step's start from the ring as it
//     stood before the step), normed (index_k_norm), rotated at its first
//     token's RoPE position and stored in the compressed cache;
//   - the last C raw keys of each request and their (t, h, w) RoPE positions
//     written to the ring.
// Padding rows (token_to_req = -1) write zeros to index_q, q, k_out and gate
// and touch no cache.
//
// Precision: the norms run in fp32 (sum of squares, sqrt, division, gain),
// as engines do; the knobs of the reference are honoured: bf16 rounding of
// the norm and RoPE outputs (round_output), hf-eager's per-op RoPE rounding,
// fp64 / fp32 / bf16-inv_freq angles and fp64 / fp32 / bf16 cos and sin.
// Angles, cos/sin, the rotation of the rotary dims and the pooled means are
// computed in fp64 and every store rounds once from fp64
// (prepare_codes.hpp), so these steps reproduce the reference bit for bit
// given the same normed values; the only differences left come from the
// fp32 norm and are bounded in tests/tolerances.hpp (GPU prepare).
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/prepare/prepare_params.hpp"
#include "gpu/prepare/prepare_validate.hpp"

namespace qsa::gpu {

// Device pointers of one launch. T = PrepareLayout::num_tokens, R = num_reqs,
// H_I, d_I, H, G, D from PrepareParams; C = compress.ring_capacity.
// "codes" are bf16 bits (uint16_t) for the bf16 dtype and fp8 e4m3 codes
// (uint8_t) for fp8; fp8 KV codes hold x / k_scale (x / v_scale) and decode
// as code * scale, the layout gpu/attention reads.
struct PrepareArgs {
  const float* index_qk = nullptr;        // [T, (H_I + 1) * d_I] indexer Q heads, then the raw key
  const float* qg = nullptr;              // [T, H, 2 * D] per head [Q | gate]
  const float* k = nullptr;               // [T, G, D]
  const float* v = nullptr;               // [T, G, D]
  const float* index_q_norm_w = nullptr;  // [d_I] zero-centred Gemma weights
  const float* index_k_norm_w = nullptr;  // [d_I]
  const float* q_norm_w = nullptr;        // [D]
  const float* k_norm_w = nullptr;        // [D]
  const int32_t* token_to_req = nullptr;  // [T], -1 on padding rows
  const int64_t* pos = nullptr;           // [T] request-relative position p
  const int64_t* rope_pos = nullptr;      // [3, T] (t, h, w) RoPE positions
  const int64_t* main_slot = nullptr;     // [T] main KV slot of each real row
  const int64_t* ring_slot = nullptr;     // [T] ring slot or -1 (the last C rows of each request)
  const int64_t* compressed_slot = nullptr;  // [T] compressed row of the group the row completes, or -1
  const int32_t* starts = nullptr;        // [R + 1] first row of each request, then starts[R]
  const int32_t* ring_blocks = nullptr;   // [R] ring block of each request
  float* ring_keys = nullptr;             // [num_ring_slots, d_I] raw keys (bf16 values), persistent
  int64_t* ring_rope = nullptr;           // [num_ring_slots, 3] (t, h, w) position of each ring member
  void* compressed = nullptr;             // [num_compressed_rows, d_I] indexer codes, persistent
  void* k_cache = nullptr;                // [num_kv_slots, G, D] KV codes, persistent
  void* v_cache = nullptr;                // [num_kv_slots, G, D] KV codes, persistent
  void* index_q = nullptr;                // [T, H_I, d_I] indexer codes (output)
  uint16_t* q = nullptr;                  // [T, H, D] bf16 bits (output)
  uint16_t* k_out = nullptr;              // [T, G, D] bf16 bits, before the cache's quantisation (output)
  uint16_t* gate = nullptr;               // [T, H, D] bf16 bits (output)
};

// Launches the stage on `stream` (asynchronous). The step must have passed
// validate_prepare with the ring tags as they stood before the step; the
// kernel also skips cache writes whose slot lies outside the layout's sizes,
// so no input can make it write out of bounds. ConfigError / InputError for
// params or sizes it cannot run and for null pointers a non-empty launch
// needs; InternalError on a GPU failure.
void launch_prepare(const PrepareParams& p, const PrepareLayout& l, const PrepareArgs& a, hipStream_t stream);

// For tests: the kernel's bf16 encoders, which on NVIDIA use the hardware
// conversion rather than the host codec, applied to n values on `stream`:
// from_float[i] and from_double[i] are the bf16 bits of f[i] and d[i],
// pairs[i] the bits of the pair (f[i] in the low half, f[i ^ 1] in the
// high one). All pointers are device pointers of n elements; n is even.
void encode_bf16_on_device(const float* f, const double* d, int64_t n, uint16_t* from_float, uint16_t* from_double,
                           uint32_t* pairs, hipStream_t stream);

}  // namespace qsa::gpu
