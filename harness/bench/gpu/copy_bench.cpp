// copy/d2d/1GiB: the bandwidth every other benchmark's "pct_copy_bw" and floor
// divide by, measured by this binary in this run (bytes read plus written,
// like ../shared/h200.md's 4.25 TB/s through PyTorch).
#include <cstdint>

#include "gpu/common/device_buffer.hpp"
#include "harness/bench/cost_model.hpp"
#include "harness/bench/gpu/bench_fill.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/gpu_env.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"

namespace qsa::bench {

void register_copy_benchmarks() {
  register_gpu_benchmark("copy/d2d/1GiB", [](benchmark::State& state) {
    guarded(state, [&] {
      GpuEnv& env = gpu_env();
      const size_t bytes = size_t{1} << 30;
      gpu::DeviceBuffer<uint8_t> src(bytes), dst(bytes);
      fill_random(src.get(), bytes, FillKind::kFp8E4m3fn, fill_key("copy.src", 0), env.stream);
      const Timing t = time_launches(state, 1, [&](int) {
        QSA_GPU_CHECK(hipMemcpyAsync(dst.get(), src.get(), bytes, hipMemcpyDeviceToDevice, env.stream));
      });
      const KernelCost cost = copy_cost(static_cast<double>(bytes));
      if (t.median_s > 0) {
        env.copy_bytes_per_s = cost.bytes / t.median_s;
        env.copy_source = "copy/d2d/1GiB of this run";
      }
      set_cost_counters(state, t, cost);
    });
  });
}

}  // namespace qsa::bench
