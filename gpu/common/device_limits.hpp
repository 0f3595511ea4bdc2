// What launchers need to know about the device they launch on, queried once
// per device (a process may drive several GPUs; the current device is read
// at every call, the attributes are not).
#pragma once

#include <cstddef>

#include "gpu/common/device_api.hpp"

namespace qsa::gpu {

struct DeviceLimits {
  int device = 0;
  int wave = 32;
  int multiprocessors = 1;
  size_t max_shared = 48 * 1024;  // dynamic shared memory one block may use (after opting in on NVIDIA)
};

// The current device's limits (ConfigError for an ordinal of 64 or more).
const DeviceLimits& device_limits();

// Blocks of `kernel` (a __global__ function's address) that one
// multiprocessor of the current device holds with `threads` threads and
// `shared_bytes` of dynamic shared memory. On NVIDIA the kernel first opts
// in to the device's whole shared memory per block and to the largest
// shared-memory carveout; that is done once per (device, kernel), and the
// answer is cached per (device, kernel, threads, bytes): launchers call this
// on every launch. At least 1 (a launch that does not fit fails on its own).
int resident_blocks(const void* kernel, int threads, size_t shared_bytes);

}  // namespace qsa::gpu
