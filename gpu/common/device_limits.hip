// Per-device launch limits (device_limits.hpp).
#include "gpu/common/device_limits.hpp"

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace qsa::gpu {

namespace {

constexpr int kMaxDevices = 64;

DeviceLimits query_device_limits(int device) {
  int wave = 0;
  int sms = 0;
  int shared = 0;
  int l2 = 0;
  int major = 0, minor = 0;
#if defined(QSA_GPU_CUDA)
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&wave, cudaDevAttrWarpSize, device));
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  QSA_GPU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
#else
  QSA_GPU_CHECK(hipDeviceGetAttribute(&wave, hipDeviceAttributeWarpSize, device));
  QSA_GPU_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
  QSA_GPU_CHECK(hipDeviceGetAttribute(&shared, hipDeviceAttributeMaxSharedMemoryPerBlock, device));
  QSA_GPU_CHECK(hipDeviceGetAttribute(&l2, hipDeviceAttributeL2CacheSize, device));
  QSA_GPU_CHECK(hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device));
  QSA_GPU_CHECK(hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, device));
#endif
  return {device, wave, sms > 0 ? sms : 1, static_cast<size_t>(shared), static_cast<size_t>(l2 > 0 ? l2 : 0),
          major, minor};
}

int current_device() {
  int device = 0;
  QSA_GPU_CHECK(hipGetDevice(&device));
  if (device < 0 || device >= kMaxDevices)
    throw ConfigError("gpu launch: device ordinal " + std::to_string(device) + " is beyond 63");
  return device;
}

}  // namespace

const DeviceLimits& device_limits() {
  static std::once_flag once[kMaxDevices];
  static DeviceLimits limits[kMaxDevices];
  const int device = current_device();
  std::call_once(once[device], [device] { limits[device] = query_device_limits(device); });
  return limits[device];
}

int resident_blocks(const void* kernel, int threads, size_t shared_bytes, Carveout carveout) {
  const DeviceLimits& d = device_limits();
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> opted_in;                    // (device, kernel)
  static std::map<std::tuple<int, const void*, int, size_t>, int> blocks;  // -> blocks per SM
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(d.device, kernel, threads, shared_bytes);
  const auto hit = blocks.find(key);
  if (hit != blocks.end()) return hit->second;
  if (opted_in.emplace(d.device, kernel).second) {
#if defined(QSA_GPU_CUDA)
    QSA_GPU_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(d.max_shared)));
    const int percent = carveout == Carveout::kMaxL1         ? cudaSharedmemCarveoutMaxL1
                        : carveout == Carveout::kSmallShared ? 10
                                                             : cudaSharedmemCarveoutMaxShared;
    QSA_GPU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent));
#else
    (void)carveout;
#endif
  }
  int n = 0;
#if defined(QSA_GPU_CUDA)
  QSA_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, shared_bytes));
#else
  QSA_GPU_CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, shared_bytes));
#endif
  n = n > 0 ? n : 1;
  blocks.emplace(key, n);
  return n;
}

}  // namespace qsa::gpu
