#include "harness/bench/gpu/gpu_env.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"
#include "harness/bench/run_context.hpp"

namespace qsa::bench {

namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

double GpuEnv::rotation_bytes() const { return std::max(2.0 * static_cast<double>(l2_bytes), 128.0 * (1 << 20)); }

GpuEnv& gpu_env() {
  static GpuEnv env;
  return env;
}

double measure_copy_bandwidth(size_t bytes, int repeats) {
  GpuEnv& env = gpu_env();
  gpu::DeviceBuffer<uint8_t> src(bytes), dst(bytes);
  QSA_GPU_CHECK(hipMemsetAsync(src.get(), 0x5a, bytes, env.stream));
  std::vector<double> seconds;
  EventPair events;
  for (int i = -2; i < repeats; ++i) {  // two warm-up copies
    const double s = events.time(env.stream, [&] {
      QSA_GPU_CHECK(hipMemcpyAsync(dst.get(), src.get(), bytes, hipMemcpyDeviceToDevice, env.stream));
    });
    if (i >= 0) seconds.push_back(s);
  }
  return 2.0 * static_cast<double>(bytes) / median_of(seconds);
}

void init_gpu_env() {
  GpuEnv& env = gpu_env();
  hipDeviceProp_t prop{};
  QSA_GPU_CHECK(hipGetDeviceProperties(&prop, 0));
  env.gpu_name = prop.name;
  env.l2_bytes = prop.l2CacheSize;
  env.sm_count = prop.multiProcessorCount;
  env.global_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  if (const char* s = env_or_null("QSA_BENCH_SEED")) env.seed = std::strtoull(s, nullptr, 0);
  if (const char* s = env_or_null("QSA_BENCH_ITERATIONS")) env.iterations = std::max(1, std::atoi(s));
  if (const char* s = env_or_null("QSA_BENCH_PAGES")) env.shuffled_pages = std::string(s) != "consecutive";
  if (const char* s = env_or_null("QSA_BENCH_SETTLE_MS")) env.settle_ms = std::clamp(std::atoi(s), 0, 60000);
  if (const char* s = env_or_null("QSA_BENCH_SHARE")) env.selection_share = parse_selection_share(s);
  if (const char* s = env_or_null("QSA_BENCH_MATRIX_TFLOPS")) {
    env.matrix_flops_per_s = std::strtod(s, nullptr) * 1e12;
    env.matrix_source = "QSA_BENCH_MATRIX_TFLOPS";
  } else {
    env.matrix_source = fmt::format("assumed {} TFLOP/s (H200 dense bf16 as measured in ../shared/h200.md; "
                                    "this binary measures no matrix rate)",
                                    kAssumedMatrixTflops);
  }
  QSA_GPU_CHECK(hipStreamCreate(&env.stream));
  env.copy_bytes_per_s = measure_copy_bandwidth(kCopyBytes, 10);
  env.copy_source = "start-up: 1 GiB device-to-device copy, median of 10";
}

void add_gpu_context() {
  const GpuEnv& env = gpu_env();
  benchmark::AddCustomContext("qsa_gpu", env.gpu_name);
  benchmark::AddCustomContext("qsa_gpu_l2_bytes", std::to_string(env.l2_bytes));
  benchmark::AddCustomContext("qsa_gpu_sms", std::to_string(env.sm_count));
  benchmark::AddCustomContext("qsa_commit", bench_commit());
  benchmark::AddCustomContext("qsa_seed", std::to_string(env.seed));
  benchmark::AddCustomContext("qsa_iterations", std::to_string(env.iterations));
  benchmark::AddCustomContext("qsa_pages", env.shuffled_pages ? "shuffled" : "consecutive");
  benchmark::AddCustomContext("qsa_settle_ms", std::to_string(env.settle_ms));
  benchmark::AddCustomContext("qsa_selection_share", fmt::format("{}", env.selection_share));
  benchmark::AddCustomContext("qsa_rotation_bytes", fmt::format("{:.0f}", env.rotation_bytes()));
  benchmark::AddCustomContext("qsa_copy_GBps_startup", fmt::format("{:.1f}", env.copy_bytes_per_s / 1e9));
  benchmark::AddCustomContext("qsa_matrix_TFLOPps", fmt::format("{:.1f}", env.matrix_flops_per_s / 1e12));
  benchmark::AddCustomContext("qsa_matrix_source", env.matrix_source);
  const QsaConfig c = bench_config();
  benchmark::AddCustomContext(
      "qsa_config", fmt::format("qwen4-exp, {} profile: H {}, G {}, D {}, H_I {}, d_I {}, K {}, r {}, P {}, fp8 {}",
                                to_string(c.profile), c.num_heads, c.num_kv_heads, c.head_dim, c.indexer_heads,
                                c.indexer_head_dim, c.budget, c.compress_ratio, c.page_size, to_string(c.fp8_flavor)));
}

}  // namespace qsa::bench
