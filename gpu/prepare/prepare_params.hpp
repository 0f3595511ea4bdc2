// Params and sizes of the fused "prepare" stage (gpu/prepare/prepare.hpp):
// host-only, so that validators and the step driver can use them without a
// GPU runtime header.
#pragma once

#include <cstdint>

#include "reference/core/config.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

// Limits of the kernel (check_prepare_params rejects anything beyond them):
// one head row lives in the registers of a 32-lane group (at most 2 pair
// and 16 tail slots per lane, gpu/prepare/prepare_head.hpp), and the inverse
// frequencies travel in the kernel arguments.
inline constexpr int kPrepareMaxHeadDim = 512;
inline constexpr int kPrepareMaxRopePairs = 64;  // rotary_dim <= 128

// Everything between the projections and the selection of one QSA layer
// step. The reference's own params, one per sub-stage (RmsNormParams.rows and
// RopeParams.heads are not used here).
struct PrepareParams {
  RmsNormParams norm_index_q, norm_index_k, norm_q, norm_k;
  RopeParams rope_index, rope_main;  // indexer Q and compressed keys; main Q and K
  CompressParams compress;
  KvCacheParams kv;
  int indexer_heads = 0;  // H_I
  int indexer_dim = 0;    // d_I
  int heads = 0;          // H
  int kv_heads = 0;       // G
  int head_dim = 0;       // D
};

// validate_config(c), then the params the reference's step driver derives
// from the same config. num_pages: main KV pages (the compressed cache has as
// many pages of P / r rows).
PrepareParams make_prepare_params(const QsaConfig& c, int64_t num_pages);

// Sizes of one launch: T rows (padding included), R requests, and the row
// counts of the persistent caches the kernel writes (for its bounds guards).
struct PrepareLayout {
  int64_t num_tokens = 0;
  int num_reqs = 0;
  int64_t num_ring_slots = 0;       // ring blocks * C
  int64_t num_compressed_rows = 0;  // pages * P / r
  int64_t num_kv_slots = 0;         // pages * P
};

// ConfigError for params the kernel does not implement (Octave KV, head dims
// beyond kPrepareMaxHeadDim, rotary_dim beyond 2 * kPrepareMaxRopePairs) or
// that contradict each other (a norm's dim that is not its head's dim, a
// rotary_dim larger than a head, r < 1, no ring capacity, ...).
void check_prepare_params(const PrepareParams& p);

}  // namespace qsa::gpu
