// Runs whole QSA layer steps over persistent caches (prefill, chunked
// prefill, decode, mixed batches, MTP draft steps) and exposes every stage's
// output for diffing.
//
// Order within a step (spec sections 4-9):
//   1. projections: index_qk_proj -> indexer Q and raw key; q_proj -> Q and
//      gate; k_proj, v_proj
//   2. indexer Q: norm, RoPE, indexer dtype; main Q/K: norm, RoPE
//   3. K/V written to the main cache at every real token's slot
//   4. completed groups pooled (older members from the ring as it was before
//      this step) and written to the compressed cache
//   5. the last C raw keys of each request written to the ring
//   6. selection: scores + top-k + expansion, or, in an MTP draft step >= 1,
//      each request's saved step-0 row
//   7. sparse attention, gate, o_proj
// Padding rows produce zeros and -1 ids and touch no cache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference/compress.hpp"
#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/kv_cache.hpp"
#include "reference/side_caches.hpp"
#include "reference/stage_record.hpp"
#include "reference/weights.hpp"

namespace qsa {

struct StepOutputs {
  StepLayout layout;
  TensorD index_q;         // [T, H_I, d_I] after norm, RoPE and the indexer dtype
  TensorD raw_keys;        // [T, d_I] projection output (bf16)
  CompressedRows compressed;
  TensorI32 block_ids;     // [T, K_B] valid prefix, then -1
  TensorD block_scores;    // [T, K_B] scores of block_ids, -inf past the prefix
  TensorI32 token_idx;     // [T, W] or [T, W + 1] with the count column
  TensorD q;               // [T, H, D] after norm and RoPE
  TensorD k;               // [T, G, D] after norm and RoPE
  TensorD v;               // [T, G, D]
  TensorD gate;            // [T, H, D]
  TensorD attn;            // [T, H, D] attention output (before the gate)
  TensorD gated;           // [T, H, D]
  TensorD out;             // [T, hidden] layer output (o_proj)
  std::vector<std::pair<std::string, double>> seconds;  // wall time per phase, in order
};

// Rows saved for MTP reuse: one per request of the last selecting step.
struct MtpRows {
  TensorI32 block_ids;  // [R, K_B]
  TensorD block_scores; // [R, K_B]
  TensorI32 token_idx;  // [R, width]
  bool valid() const { return !block_ids.empty(); }
};

class StepDriver {
 public:
  StepDriver(const QsaConfig& config, LayerWeights weights, const CacheGeometry& geometry);

  // hidden: [T, hidden_size]. Throws InputError for bad metadata or reads of
  // cache entries the steps so far never wrote. With a feed (isolated
  // replay), every recorded stage value replaces the driver's own before
  // later stages and the caches use it; the returned outputs are always the
  // driver's own, so they can be compared with the feed.
  StepOutputs run(const StepMetadata& meta, const TensorD& hidden, const StageRecord* feed = nullptr);

  const QsaConfig& config() const { return config_; }
  const LayerWeights& weights() const { return weights_; }
  const CacheGeometry& geometry() const { return geometry_; }
  MainKvCache& kv_cache() { return kv_; }
  RawKeyRing& ring() { return ring_; }
  CompressedCache& compressed_cache() { return compressed_; }
  const MtpRows& mtp_rows() const { return mtp_; }

 private:
  QsaConfig config_;
  LayerWeights weights_;
  CacheGeometry geometry_;
  MainKvCache kv_;
  RawKeyRing ring_;
  CompressedCache compressed_;
  MtpRows mtp_;
};

}  // namespace qsa
