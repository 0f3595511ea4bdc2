// The built-in example: a short step sequence that exercises every QSA path
// (mixed chunked prefill, a group straddling a chunk boundary, a decode batch
// with a padding row, an MTP draft pair) on random bf16 hidden states.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

struct ExampleOptions {
  uint64_t seed = 20261130;
  int64_t prefill = 0;  // tokens of request 0; 0 picks a size that suits the preset
  int64_t chunk = 0;    // chunked-prefill chunk; 0 = about half the prefill, not a multiple of r
  int decode_steps = 2;
  bool mtp = true;      // append an MTP draft step 0 and a reuse step
};

struct ExampleStep {
  std::string name;
  StepMetadata meta;
  TensorD hidden;  // [T, hidden_size]
};

struct ExampleRun {
  CacheGeometry geometry;
  std::vector<ExampleStep> steps;
};

ExampleRun build_example(const QsaConfig& config, const ExampleOptions& options);

// [tokens, hidden_size] standard-normal bf16 values from the named stream.
TensorD random_hidden(const QsaConfig& config, int64_t tokens, uint64_t seed, const std::string& stream);

}  // namespace qsa
