// Registration helpers of qsa_bench_cpu (see cpu_main.cpp for the list).
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "harness/bench/cost_model.hpp"
#include "reference/core/config.hpp"

namespace qsa::bench {

// decode/b<n>/ctx<c> or prefill/c<n>/ctx<c> (shape_names.hpp).
std::string shape_label(const StepShape& s);

// FLOPs per iteration and the achieved GFLOP/s (real time); nothing for a
// cost without FLOPs.
void set_cpu_cost_counters(benchmark::State& state, const KernelCost& cost);

// Registers cpu/<prefix>/<stage>/<shape> for every stage of stage_bench.cpp,
// or only those named in `only`.
void register_stage_benchmarks(const std::string& prefix, const QsaConfig& config, const StepShape& shape,
                               const std::vector<std::string>& only = {});

}  // namespace qsa::bench
