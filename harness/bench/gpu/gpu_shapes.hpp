// The shape grid of qsa_bench_gpu (issue 6): the `qwen4-exp` preset in the
// engine profile; decode batches 1, 8, 64, 256 at contexts 4K, 32K, 128K;
// prefill chunks 512, 2048, 8192 at the same contexts. Decode runs in both
// dtypes everywhere; prefill in bf16 everywhere and in fp8 at chunk 2048
// only, to keep a whole run on the H200 within a few minutes.
// scripts/bench_baselines.py repeats this grid: change both together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/bench/cost_model.hpp"
#include "harness/bench/shape_names.hpp"
#include "reference/core/config.hpp"

namespace qsa::bench {

inline const std::vector<int> kDecodeBatches = {1, 8, 64, 256};
inline const std::vector<int64_t> kContexts = {4096, 32768, 131072};
inline const std::vector<int64_t> kPrefillChunks = {512, 2048, 8192};
inline constexpr int64_t kFp8PrefillChunk = 2048;

inline QsaConfig bench_config() {
  QsaConfig c = config_preset("qwen4-exp");
  apply_profile(c, PrecisionProfile::kEngine);
  return c;
}

struct NamedShape {
  std::string name;  // decode/b<batch>/ctx<context> or prefill/c<chunk>/ctx<context>
  StepShape shape;
};

inline std::vector<NamedShape> decode_grid() {
  std::vector<NamedShape> out;
  for (int64_t ctx : kContexts)
    for (int b : kDecodeBatches) out.push_back({decode_name(b, ctx), decode_shape(b, ctx)});
  return out;
}

// fp8 = true: the reduced fp8 grid (chunk kFp8PrefillChunk only).
inline std::vector<NamedShape> prefill_grid(bool fp8) {
  std::vector<NamedShape> out;
  for (int64_t ctx : kContexts)
    for (int64_t chunk : kPrefillChunks)
      if (!fp8 || chunk == kFp8PrefillChunk) out.push_back({prefill_name(chunk, ctx), prefill_shape(chunk, ctx)});
  return out;
}

}  // namespace qsa::bench
