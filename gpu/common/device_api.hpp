// The thin device header: HIP on AMD, and the small subset of the HIP runtime
// qsa uses mapped to the CUDA runtime when nvcc compiles the same .hip files
// for NVIDIA (Debian's HIP NVIDIA headers do not build against CUDA 13).
// Every runtime call goes through QSA_GPU_CHECK, which turns a failure into a
// qsa::InternalError carrying file, line and the statement.
//
// Only names listed here may be used by kernels and launchers; extend the
// list by hand when a new runtime call is needed (keep it small).
#pragma once

#include <cstdint>
#include <string>

#include "reference/core/errors.hpp"

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
#define QSA_GPU_HIP 1
#else
#include <cuda_runtime.h>
#define QSA_GPU_CUDA 1
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
#define hipSuccess cudaSuccess
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipGetDevice cudaGetDevice
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceProp_t cudaDeviceProp
#define hipEventCreate cudaEventCreate
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipGraph_t cudaGraph_t
#define hipGraphExec_t cudaGraphExec_t
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamEndCapture cudaStreamEndCapture
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy
#endif

namespace qsa::gpu {

[[noreturn]] inline void throw_gpu_error(hipError_t err, const char* stmt, const char* file, int line) {
  throw InternalError(std::string("GPU call failed: ") + stmt + " -> " + hipGetErrorString(err) + " at " +
                      file + ":" + std::to_string(line));
}

// Whether ptr is a multiple of n bytes: the launchers' test before they
// pick vector loads and stores (or refuse a pointer that needs them).
inline bool is_aligned(const void* ptr, uintptr_t n) { return reinterpret_cast<uintptr_t>(ptr) % n == 0; }

// Wave (warp) width is a property of the device, never a literal. Device
// code reads the `warpSize` builtin, which both HIP and CUDA provide.
inline int wave_size(int device = 0) {
  hipDeviceProp_t prop{};
  const hipError_t err = hipGetDeviceProperties(&prop, device);
  if (err != hipSuccess) throw_gpu_error(err, "hipGetDeviceProperties", __FILE__, __LINE__);
  return prop.warpSize;
}

}  // namespace qsa::gpu

#define QSA_GPU_CHECK(stmt)                                                          \
  do {                                                                               \
    const hipError_t qsa_gpu_err_ = (stmt);                                          \
    if (qsa_gpu_err_ != hipSuccess) ::qsa::gpu::throw_gpu_error(qsa_gpu_err_, #stmt, __FILE__, __LINE__); \
  } while (0)

// After every launch: catches bad launch configurations immediately.
#define QSA_GPU_CHECK_LAUNCH() QSA_GPU_CHECK(hipGetLastError())
