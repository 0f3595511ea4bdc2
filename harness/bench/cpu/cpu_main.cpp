// qsa_bench_cpu: the fp64 reference's stages and whole StepDriver steps at
// the `tiny` preset (quick: --benchmark_filter=tiny) and the `qwen4-exp`
// preset, plus how the reference's cost grows with context and budget
// (cpu/qwen4-exp/growth/...). Results and commands: docs/performance.md.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "harness/bench/cpu/cpu_bench.hpp"
#include "harness/bench/cpu/cpu_case.hpp"
#include "harness/bench/run_context.hpp"
#include "harness/bench/shape_names.hpp"

namespace qsa::bench {

std::string shape_label(const StepShape& s) {
  const RequestChunk& first = s.requests.at(0);
  bool decode = true;
  for (const RequestChunk& q : s.requests) decode = decode && q.query_len == 1 && q.context == first.context;
  if (decode) return decode_name(static_cast<int>(s.requests.size()), first.context);
  if (s.requests.size() == 1) return prefill_name(first.query_len, first.context);
  return fmt::format("mixed/r{}/t{}", s.requests.size(), s.rows());
}

void set_cpu_cost_counters(benchmark::State& state, const KernelCost& cost) {
  if (cost.flops <= 0) return;
  state.counters["flops"] = cost.flops;
  state.counters["GFLOPps"] = benchmark::Counter(cost.flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

void register_all() {
  const QsaConfig tiny = config_preset("tiny"), qwen = config_preset("qwen4-exp");
  for (const StepShape& s : {decode_shape(1, 64), decode_shape(8, 1024), prefill_shape(64, 256)})
    register_stage_benchmarks("tiny", tiny, s);
  for (const StepShape& s : {decode_shape(1, 4096), decode_shape(8, 4096), prefill_shape(512, 3584)})
    register_stage_benchmarks("qwen4-exp", qwen, s);
  // Growth: one decode row, the stages whose cost depends on context or budget.
  for (const int budget : {512, 2048, 8192}) {
    QsaConfig c = qwen;
    c.budget = budget;
    for (const int64_t ctx : {1024, 4096, 16384, 65536})
      register_stage_benchmarks(fmt::format("qwen4-exp/growth/K{}", budget), c, decode_shape(1, ctx),
                                {"select", "attention", "step"});
  }
}

}  // namespace

}  // namespace qsa::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("qsa_commit", qsa::bench::bench_commit());
  benchmark::AddCustomContext("qsa_seed", std::to_string(qsa::bench::kCpuBenchSeed));
  benchmark::AddCustomContext("qsa_cpu_model", qsa::bench::cpu_model());
  benchmark::AddCustomContext("qsa_omp_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("qsa_profile", "engine (preset default)");
  try {
    qsa::bench::register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsa_bench_cpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
