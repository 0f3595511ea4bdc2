// qsa_bench_gpu: Google Benchmark timing of the GPU kernels at the
// `qwen4-exp` shapes (docs/performance.md). Without a usable GPU it prints
// NOT RUN and exits 77, like the GPU tests (--benchmark_list_tests still
// lists the benchmarks). Environment: QSA_COMMIT, QSA_BENCH_SEED,
// QSA_BENCH_ITERATIONS, QSA_BENCH_PAGES=consecutive, QSA_BENCH_MATRIX_TFLOPS,
// QSA_BENCH_SETTLE_MS, QSA_BENCH_SHARE (see gpu_env.hpp).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <string>

#include "gpu/common/device_api.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/gpu_env.hpp"
#include "reference/core/errors.hpp"

namespace {

bool list_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--benchmark_list_tests" || a == "--benchmark_list_tests=true") return true;
  }
  return false;
}

// Google Benchmark runs benchmarks in registration order.
void register_all() {
  qsa::bench::register_copy_benchmarks();  // first: the others use its bandwidth
  qsa::bench::register_projection_benchmarks();
  qsa::bench::register_prepare_benchmarks();
  qsa::bench::register_select_benchmarks();
  qsa::bench::register_expand_benchmarks();
  qsa::bench::register_attention_benchmarks();
  qsa::bench::register_step_benchmarks();  // after the per-kernel ones
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const bool have_gpu = hipGetDeviceCount(&devices) == hipSuccess && devices > 0;
  if (!have_gpu && !list_only(argc, argv)) {
    std::printf("qsa_bench_gpu: no GPU available, NOT RUN\n");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  try {
    if (have_gpu) {
      qsa::bench::init_gpu_env();
      qsa::bench::add_gpu_context();
    }
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const qsa::InputError& e) {  // a bad environment variable
    std::fprintf(stderr, "qsa_bench_gpu: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsa_bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
