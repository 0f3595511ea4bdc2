// Programmatic dependent launch (NVIDIA sm_90+): a kernel that only
// finishes what the kernel before it started (a split-K merge, select's
// top-k) can be scheduled while that kernel still runs, do its independent
// loads, and wait for the first kernel's results at one point, instead of
// paying its launch and block scheduling after the first kernel drains. At
// one decode row that gap is several microseconds of a ~20 us step. A
// kernel that needs everything before it (prepare) waits first thing and
// still saves the scheduling.
//
// On HIP, and on NVIDIA before sm_90, the device calls are no-ops and
// launch_dependent is a plain launch: the stream then orders the two
// kernels as usual. Include only from .hip files.
#pragma once

#include <cstddef>

#include "gpu/common/device_api.hpp"

namespace qsa::gpu {

// In the first kernel: lets the dependent kernel's blocks be scheduled once
// every block of this kernel has called it (or exited). Safe anywhere: the
// dependent still waits for this kernel's memory in wait_for_primary.
__device__ inline void allow_dependent_launch() {
#if defined(QSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// In the dependent kernel: blocks until the kernel before it has completed
// and its writes are visible. Reads of anything that kernel writes must come
// after this call; reads of older data (written before that kernel began)
// may come before it.
__device__ inline void wait_for_primary() {
#if defined(QSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// How a kernel is launched: grid, block and dynamic shared memory.
struct LaunchShape {
  dim3 grid, block;
  size_t shared_bytes = 0;
};

// kernel<<<grid, block, shared_bytes, stream>>>(args...), allowed to overlap
// the previous kernel of the stream (which must call allow_dependent_launch
// for that to happen; otherwise it starts when that kernel ends, as usual).
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), const LaunchShape& shape, hipStream_t stream, Args... args) {
#if defined(QSA_GPU_CUDA)
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = shape.grid;
  cfg.blockDim = shape.block;
  cfg.dynamicSmemBytes = shape.shared_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  QSA_GPU_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
#else
  kernel<<<shape.grid, shape.block, shape.shared_bytes, stream>>>(args...);
  QSA_GPU_CHECK_LAUNCH();
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, hipStream_t stream, Args... args) {
  launch_dependent(kernel, LaunchShape{grid, block}, stream, args...);
}

}  // namespace qsa::gpu
