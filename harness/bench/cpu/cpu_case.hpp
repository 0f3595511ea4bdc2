// Inputs of the reference benchmarks (qsa_bench_cpu): a StepDriver whose
// caches already hold `context` tokens of every request, the metadata and
// hidden states of the measured step, and one run of that step, whose
// intermediate tensors feed the stage benchmarks. The cached context is
// written straight into the caches with random values instead of being
// prefilled (a 64K-token prefill of qwen4-exp would take minutes); nothing
// the measured step computes depends on how those values were made.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "harness/bench/cost_model.hpp"
#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/step_driver.hpp"

namespace qsa::bench {

inline constexpr uint64_t kCpuBenchSeed = 20261130;

struct CpuCase {
  QsaConfig config;
  StepShape shape;
  std::unique_ptr<StepDriver> driver;
  StepMetadata meta;  // the measured step
  TensorD hidden;     // [T, hidden_size] bf16 values
  StepOutputs out;    // one run of the step
};

// The case for (config, shape), built on first use. Only the most recent
// case is kept (a qwen4-exp case at 64K context holds ~1 GB); benchmarks of
// one case are registered consecutively, so each case is built once.
CpuCase& cpu_case(const QsaConfig& config, const StepShape& shape);

}  // namespace qsa::bench
