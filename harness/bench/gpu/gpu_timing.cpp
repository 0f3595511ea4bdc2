#include "harness/bench/gpu/gpu_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>
#include <utility>

#include "harness/bench/gpu/gpu_env.hpp"

namespace qsa::bench {

EventPair::EventPair() {
  QSA_GPU_CHECK(hipEventCreate(&start_));
  QSA_GPU_CHECK(hipEventCreate(&stop_));
}

EventPair::~EventPair() {
  (void)hipEventDestroy(start_);
  (void)hipEventDestroy(stop_);
}

double EventPair::time(hipStream_t stream, const std::function<void()>& fn) {
  QSA_GPU_CHECK(hipEventRecord(start_, stream));
  fn();
  QSA_GPU_CHECK(hipEventRecord(stop_, stream));
  QSA_GPU_CHECK(hipEventSynchronize(stop_));
  float ms = 0.0f;
  QSA_GPU_CHECK(hipEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms) * 1e-3;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lo + hi);
}

int rotation_copies(double bytes_per_launch) {
  if (!(bytes_per_launch > 0)) return 1;
  const double n = std::ceil(gpu_env().rotation_bytes() / bytes_per_launch);
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(kMaxCopies)));
}

Timing time_launches(benchmark::State& state, int copies, const std::function<void(int)>& launch) {
  const GpuEnv& env = gpu_env();
  Timing t;
  t.copies = copies;
  EventPair events;
  int next = 0;
  std::vector<double> host_per_launch;
  auto batch = [&](int n) {
    return events.time(env.stream, [&] {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) {
        launch(next);
        next = (next + 1) % copies;
      }
      const std::chrono::duration<double> host = std::chrono::steady_clock::now() - start;
      host_per_launch.push_back(host.count() / n);
    });
  };
  // Idle first: the driver's work on memory that the previous benchmark
  // freed must not fall into this one's batches (kDefaultSettleMs).
  QSA_GPU_CHECK(hipStreamSynchronize(env.stream));
  std::this_thread::sleep_for(std::chrono::milliseconds(env.settle_ms));
  // Warm-up: a whole rotation (first-touch, instruction caches, clocks),
  // then a timed one that sizes the batch.
  batch(copies);
  const double rotation = batch(copies);
  const int rotations = rotation > 0 ? static_cast<int>(std::ceil(kMinBatchSeconds / rotation)) : 1;
  t.launches_per_batch = copies * std::clamp(rotations, 1, 1 << 16);
  std::vector<double> per_launch;
  host_per_launch.clear();  // only the timed batches count
  for (auto _ : state) {
    const double s = batch(t.launches_per_batch) / t.launches_per_batch;
    state.SetIterationTime(s);
    per_launch.push_back(s);
  }
  t.median_s = median_of(per_launch);
  t.host_median_s = median_of(host_per_launch);
  t.min_s = per_launch.empty() ? 0.0 : *std::min_element(per_launch.begin(), per_launch.end());
  return t;
}

void set_cost_counters(benchmark::State& state, const Timing& t, const KernelCost& cost) {
  const GpuEnv& env = gpu_env();
  const double floor_s = floor_seconds(cost, env.copy_bytes_per_s, env.matrix_flops_per_s);
  auto& c = state.counters;
  c["median_us"] = t.median_s * 1e6;
  c["min_us"] = t.min_s * 1e6;
  c["bytes"] = cost.bytes;
  c["flops"] = cost.flops;
  c["GBps"] = t.median_s > 0 ? cost.bytes / t.median_s / 1e9 : 0.0;
  c["TFLOPps"] = t.median_s > 0 ? cost.flops / t.median_s / 1e12 : 0.0;
  c["copy_GBps"] = env.copy_bytes_per_s / 1e9;
  c["pct_copy_bw"] = t.median_s > 0 ? 100.0 * cost.bytes / t.median_s / env.copy_bytes_per_s : 0.0;
  c["floor_us"] = floor_s * 1e6;
  c["pct_of_ceiling"] = t.median_s > 0 ? 100.0 * floor_s / t.median_s : 0.0;
  c["copies"] = t.copies;
  c["launches_per_batch"] = t.launches_per_batch;
  c["host_us"] = t.host_median_s * 1e6;
}

void register_gpu_benchmark(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn = std::move(fn)](benchmark::State& st) { fn(st); })
      ->UseManualTime()
      ->Iterations(gpu_env().iterations)
      ->Unit(benchmark::kMicrosecond);
}

void guarded(benchmark::State& state, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace qsa::bench
