// GPU-event timing for qsa_bench_gpu.
//
// A benchmark owns `copies` independent input sets (rotation) so that the
// bytes a run of consecutive launches touches exceed twice the L2: no launch
// finds its inputs in cache. Per benchmark: an idle wait (GpuEnv::settle_ms),
// one warm-up rotation (which also sizes the batch), then `iterations`
// batches, each a whole number of rotations lasting at least
// kMinBatchSeconds, timed by two events on the stream. Each batch reports
// (batch time / launches) through SetIterationTime, so real_time is the mean
// time of one launch; the median and minimum over the batches are counters.
// Launches are enqueued back to back without synchronisation, as an engine
// does; kernels shorter than the host's launch cost (a few microseconds) are
// therefore launch-bound. The counter host_us (the median over the batches
// of the host's time to enqueue them, per launch) shows how close a kernel
// is to that bound: where it nears median_us, the host, not the GPU, sets
// the time.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "gpu/common/device_api.hpp"
#include "harness/bench/cost_model.hpp"

namespace qsa::bench {

// At least 1 ms per batch. With 200 us, a ~200 us launch (select at 64 rows
// x 128K) was timed one or two to a batch depending on its warm-up, and the
// one-launch batches measured 5-10 us more: the first launch's enqueue and
// start latency fall inside the events and a batch of one cannot hide them.
inline constexpr double kMinBatchSeconds = 1e-3;
inline constexpr int kMaxCopies = 2048;  // beyond this tiny kernels stay L2-resident (counter `copies` shows it)

// Two events; time() runs fn between them on `stream` and returns seconds.
class EventPair {
 public:
  EventPair();
  ~EventPair();
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double time(hipStream_t stream, const std::function<void()>& fn);

 private:
  hipEvent_t start_{}, stop_{};
};

double median_of(std::vector<double> v);

// Input sets needed so that a rotation touches more than rotation_bytes():
// ceil(rotation_bytes / bytes_per_launch), within [1, kMaxCopies].
int rotation_copies(double bytes_per_launch);

struct Timing {
  double median_s = 0.0;
  double min_s = 0.0;
  double host_median_s = 0.0;  // host time to enqueue one launch (median over batches)
  int copies = 0;
  int launches_per_batch = 0;
};

// Runs the timed loop of `state`; launch(i) enqueues one launch on input set
// i (on gpu_env().stream, asynchronously). Errors thrown by launch skip the
// benchmark with the message.
Timing time_launches(benchmark::State& state, int copies, const std::function<void(int)>& launch);

// Counters of a kernel benchmark: the minimal bytes and FLOPs of the shape
// (cost model), the achieved GB/s and TFLOP/s at the median, the percentage
// of the copy bandwidth, the floor max(bytes / copy bandwidth, FLOPs /
// matrix rate) and the percentage of that ceiling, the rotation, and the
// host's enqueue time per launch (host_us).
void set_cost_counters(benchmark::State& state, const Timing& t, const KernelCost& cost);

// Registers a manual-time benchmark with the run's iteration count, in µs.
void register_gpu_benchmark(const std::string& name, std::function<void(benchmark::State&)> fn);

// Runs fn, turning a qsa or GPU error into SkipWithError (a shape the kernel
// rejects must not end the whole run).
void guarded(benchmark::State& state, const std::function<void()>& fn);

}  // namespace qsa::bench
