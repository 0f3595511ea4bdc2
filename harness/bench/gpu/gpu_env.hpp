// Run-wide settings of qsa_bench_gpu: the device, the stream every launch
// goes to, the seed, and the two rates the floors divide by — the copy
// bandwidth this binary measures at start-up (and again in its copy
// benchmark, which runs first) and the matrix rate, which it does not
// measure (no BLAS in this binary): QSA_BENCH_MATRIX_TFLOPS, or the H200's
// measured dense bf16 rate of ../shared/h200.md.
#pragma once

#include <cstdint>
#include <string>

#include "gpu/common/device_api.hpp"

namespace qsa::bench {

// The H200's dense bf16 matrix rate as measured there (about 790 TFLOP/s;
// the vendor's figure is ~990).
inline constexpr double kAssumedMatrixTflops = 790.0;

// How long each benchmark waits, idle, before its warm-up. Freeing device
// memory is followed by work of the driver that takes DRAM bandwidth: after
// 16 GiB were freed, a 512 MiB read stream ran 15% slower for 45 ms, then at
// its usual speed again (docs/performance.md, fifteenth pass). A benchmark
// that frees its 16 GiB page pool would otherwise slow the next one down:
// select at 64 rows x 128K measured 8 us more after a prepare benchmark
// (twelfth and thirteenth passes). An engine allocates its pools once.
inline constexpr int kDefaultSettleMs = 100;

struct GpuEnv {
  std::string gpu_name;
  int64_t l2_bytes = 0;
  int sm_count = 0;
  int64_t global_bytes = 0;
  uint64_t seed = 20261130;        // QSA_BENCH_SEED
  int iterations = 20;             // timed batches per benchmark (QSA_BENCH_ITERATIONS)
  bool shuffled_pages = true;      // QSA_BENCH_PAGES=consecutive maps pages in order
  int settle_ms = kDefaultSettleMs;  // idle wait before each benchmark's warm-up (QSA_BENCH_SETTLE_MS)
  // Share of the previous row's blocks a prefill row keeps (QSA_BENCH_SHARE;
  // 0: independent rows; harness/bench/batch_metadata.hpp).
  double selection_share = 0.0;
  double copy_bytes_per_s = 0.0;   // read + written bytes per second of a device-to-device copy
  std::string copy_source;         // which measurement copy_bytes_per_s comes from
  double matrix_flops_per_s = kAssumedMatrixTflops * 1e12;
  std::string matrix_source;
  hipStream_t stream = nullptr;

  // Bytes a rotation of inputs must exceed so that no launch finds its
  // inputs in L2: twice the L2, at least 128 MiB.
  double rotation_bytes() const;
};

GpuEnv& gpu_env();

// Queries device 0, creates the stream, reads the environment variables and
// measures the copy bandwidth (1 GiB device-to-device, median of 10).
void init_gpu_env();

// Median read + written bytes per second of `repeats` copies of `bytes`.
double measure_copy_bandwidth(size_t bytes, int repeats);

// Records the device, commit, seed, rates and settings in the JSON context.
void add_gpu_context();

}  // namespace qsa::bench
