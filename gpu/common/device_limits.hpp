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
  size_t l2_bytes = 0;            // the L2 cache (0 where the runtime does not say)
  int major = 0, minor = 0;       // compute capability (NVIDIA; AMD: the runtime's values)
};

// The current device's limits (ConfigError for an ordinal of 64 or more).
const DeviceLimits& device_limits();

// Dynamic shared memory that keeps a block alone on its multiprocessor:
// more than half of what one block may take, so that no multiprocessor
// holds two such blocks (the spread decode kernel, whose blocks would
// otherwise share a multiprocessor's copies, and the blocks a test parks on
// multiprocessors to keep that kernel's blocks off them).
inline size_t one_block_per_multiprocessor_shared(const DeviceLimits& d) { return d.max_shared / 2 + 1024; }

// How an NVIDIA multiprocessor splits its on-chip memory between shared
// memory and L1 for a kernel (AMD has no such split: ignored there).
// kMaxShared suits kernels that stage their operands in shared memory (the
// attention kernels, the staged scorer); kMaxL1 suits kernels that use none
// and read through L1 (the tensor-core select scorer: with the largest
// shared-memory carveout it ran with about 23 KB of L1, docs/performance.md,
// twelfth pass). kSmallShared (a 10% hint: 32 KiB of shared memory on an
// H200) is for kernels that read through L1 and still need a little shared
// memory in every block: with kMaxL1 the driver sizes the carveout for one
// block, so two blocks of 8 KiB shared one 16 KiB carveout and only one fit
// per SM (the select scorer with its histogram, fourteenth pass).
enum class Carveout { kMaxShared, kMaxL1, kSmallShared };

// Blocks of `kernel` (a __global__ function's address) that one
// multiprocessor of the current device holds with `threads` threads and
// `shared_bytes` of dynamic shared memory. On NVIDIA the kernel first opts
// in to the device's whole shared memory per block and to `carveout`; that
// is done once per (device, kernel) (a kernel keeps the carveout of its
// first call), and the answer is cached per (device, kernel, threads,
// bytes): launchers call this on every launch. At least 1 (a launch that
// does not fit fails on its own).
int resident_blocks(const void* kernel, int threads, size_t shared_bytes, Carveout carveout = Carveout::kMaxShared);

}  // namespace qsa::gpu
