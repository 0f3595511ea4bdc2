// Names of benchmark shapes, shared by qsa_bench_gpu, qsa_bench_cpu and (by
// convention, see scripts/bench_baselines.py) the PyTorch baselines, so that
// scripts/compare_bench.py can match results by name:
//   decode/b<batch>/ctx<context>    `batch` requests, one row each at position `context`
//   prefill/c<chunk>/ctx<context>   one request, `chunk` rows after `context` cached tokens
// A benchmark's full name is <kernel>/<shape>[/<dtype>], e.g.
// attention/decode/b64/ctx32768/fp8.
#pragma once

#include <cstdint>
#include <string>

#include "reference/core/config.hpp"

namespace qsa::bench {

inline std::string decode_name(int batch, int64_t context) {
  return "decode/b" + std::to_string(batch) + "/ctx" + std::to_string(context);
}

inline std::string prefill_name(int64_t chunk, int64_t context) {
  return "prefill/c" + std::to_string(chunk) + "/ctx" + std::to_string(context);
}

inline std::string dtype_name(IndexerDtype d) { return d == IndexerDtype::kFp8 ? "fp8" : "bf16"; }
inline std::string dtype_name(KvDtype d) { return to_string(d); }

}  // namespace qsa::bench
