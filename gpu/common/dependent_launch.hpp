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

// How a kernel is launched: grid, block, dynamic shared memory and, on
// NVIDIA sm_90+, clusters of `cluster_z` blocks along the grid's z (1: no
// clusters; gridDim.z must be a multiple of it). The caller checks that the
// device runs clusters of that size (active_clusters, device_limits.hpp).
struct LaunchShape {
  dim3 grid, block;
  size_t shared_bytes = 0;
  unsigned cluster_z = 1;
};

// kernel<<<grid, block, shared_bytes, stream>>>(args...) in `cluster_z`
// clusters, allowed to overlap the previous kernel of the stream (which must
// call allow_dependent_launch for that to happen; otherwise it starts when
// that kernel ends, as usual).
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), const LaunchShape& shape, hipStream_t stream, Args... args) {
#if defined(QSA_GPU_CUDA)
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = 1;
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = shape.cluster_z;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = shape.grid;
  cfg.blockDim = shape.block;
  cfg.dynamicSmemBytes = shape.shared_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = shape.cluster_z > 1 ? 2 : 1;
  QSA_GPU_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
#else
  if (shape.cluster_z != 1) throw ConfigError("gpu launch: thread block clusters exist only on NVIDIA sm_90+");
  kernel<<<shape.grid, shape.block, shape.shared_bytes, stream>>>(args...);
  QSA_GPU_CHECK_LAUNCH();
#endif
}

template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, hipStream_t stream, Args... args) {
  launch_dependent(kernel, LaunchShape{grid, block}, stream, args...);
}

}  // namespace qsa::gpu
