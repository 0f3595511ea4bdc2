// The per-device ring of arrival counters (arrival_counters.hpp).
#include "gpu/common/arrival_counters.hpp"

#include <mutex>
#include <string>

#include "gpu/common/device_api.hpp"
#include "gpu/common/device_limits.hpp"

namespace qsa::gpu {

uint32_t* arrival_counters(int64_t n) {
  if (n < 1 || n > kArrivalRing)
    throw ConfigError("gpu launch: " + std::to_string(n) + " arrival counters do not fit the ring of " +
                      std::to_string(kArrivalRing));
  struct Ring {
    uint32_t* base = nullptr;
    int64_t next = 0;
  };
  static std::mutex mutex;
  static Ring rings[64];  // per device ordinal (device_limits refuses 64 and up)
  const int device = device_limits().device;
  const std::lock_guard<std::mutex> lock(mutex);
  Ring& r = rings[device];
  if (r.base == nullptr) {
    void* p = nullptr;
    QSA_GPU_CHECK(hipMalloc(&p, static_cast<size_t>(kArrivalRing) * sizeof(uint32_t)));
    QSA_GPU_CHECK(hipMemset(p, 0, static_cast<size_t>(kArrivalRing) * sizeof(uint32_t)));
    QSA_GPU_CHECK(hipDeviceSynchronize());  // zero before any stream's kernel reads it
    r.base = static_cast<uint32_t*>(p);
  }
  if (r.next + n > kArrivalRing) r.next = 0;
  uint32_t* out = r.base + r.next;
  r.next += n;
  return out;
}

}  // namespace qsa::gpu
