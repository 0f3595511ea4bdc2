// Runs whole QSA layer steps on the GPU over device-resident paged caches and
// returns every stage's output in the reference's StepOutputs, so replay and
// the tests compare the two backends with the one comparator.
//
// One step, all on one stream (the order of reference/step_driver.hpp):
//   1. hidden -> bf16; the four projection GEMMs (gpu/projection)
//   2. the fused prepare launch (gpu/prepare): norms, RoPE, gate split,
//      indexer dtype, K/V cache write, pooling of completed groups, ring write
//   3. selection (gpu/select) + expansion (gpu/expand), or in an MTP draft
//      step >= 1 the saved step-0 rows (gpu/mtp)
//   4. sparse attention with the gate epilogue (gpu/attention)
//   5. o_proj (gpu/projection)
// Host checks before each launch: the step metadata (derive_step_layout),
// every index a kernel reads through (the launchers' validators), and the
// cache tags (cache_tags.hpp), so bad traces fail with the reference's
// InputError and no kernel reads out of bounds.
//
// What it runs: bf16 activations (the engine and hf-eager profiles; hf-eager's
// bf16-normalised P takes the two-pass decode attention). Configs the kernels
// do not implement (unrounded fp64 storage, Octave KV) are a ConfigError from
// check_gpu_supported, naming the field.
#pragma once

#include <memory>

#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/step_driver.hpp"
#include "reference/weights.hpp"

namespace qsa::gpu {

// ConfigError naming the first setting the GPU step driver cannot run.
void check_gpu_supported(const QsaConfig& config);

class GpuStepDriver {
 public:
  GpuStepDriver(const QsaConfig& config, const LayerWeights& weights, const CacheGeometry& geometry);
  ~GpuStepDriver();
  GpuStepDriver(const GpuStepDriver&) = delete;
  GpuStepDriver& operator=(const GpuStepDriver&) = delete;

  // Initial cache state, values already in the storage dtype (a trace's
  // snapshot; the same calls as the reference caches' write()).
  void write_kv(int64_t slot, int64_t position, const double* k, const double* v);  // [G, D] each
  void write_ring(int64_t slot, int64_t position, const int64_t rope3[3], const double* key);  // [d_I]
  void write_compressed(int64_t slot, int64_t block, const double* key);  // [d_I]

  // hidden: [T, hidden_size]. Throws InputError for bad metadata or reads of
  // cache entries earlier steps never wrote, ConfigError for limits of the
  // kernels, InternalError for a GPU failure. StepOutputs.seconds holds
  // the wall time of each phase (the stream is synchronised at each mark).
  StepOutputs run(const StepMetadata& meta, const TensorD& hidden);

  const QsaConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qsa::gpu
