// An owning device allocation of n elements of T, for launchers' callers and
// tests: upload / download / poison, every runtime call checked. Move-only.
// Allocations are rounded up to whole 32-bit words so that poison_words can
// fill buffers of 8- and 16-bit elements too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/common/device_api.hpp"
#include "gpu/common/poison.hpp"

namespace qsa::gpu {

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device buffers hold plain values");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ == 0) return;
    void* p = nullptr;
    QSA_GPU_CHECK(hipMalloc(&p, words() * sizeof(uint32_t)));
    ptr_ = static_cast<T*>(p);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  // A destructor cannot throw; a failing hipFree here means the context is
  // already broken, which the next checked call reports.
  ~DeviceBuffer() { release(); }

  T* get() { return ptr_; }
  const T* get() const { return ptr_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void upload(const T* src, size_t n) {
    require_size(n, "upload");
    if (n) QSA_GPU_CHECK(hipMemcpy(ptr_, src, n * sizeof(T), hipMemcpyHostToDevice));
  }
  void upload(const std::vector<T>& src) { upload(src.data(), src.size()); }

  // Synchronous: waits for the copy (and so for earlier work on the null stream).
  std::vector<T> download() const {
    std::vector<T> out(n_);
    if (n_) QSA_GPU_CHECK(hipMemcpy(out.data(), ptr_, bytes(), hipMemcpyDeviceToHost));
    return out;
  }

  // Fills every word of the allocation with `pattern` (see poison.hpp).
  void poison(uint32_t pattern) {
    if (n_ == 0) return;
    poison_words(reinterpret_cast<uint32_t*>(ptr_), words(), pattern);
    QSA_GPU_CHECK(hipDeviceSynchronize());
  }
  void zero() {
    if (n_) QSA_GPU_CHECK(hipMemset(ptr_, 0, bytes()));
  }

 private:
  size_t words() const { return (n_ * sizeof(T) + sizeof(uint32_t) - 1) / sizeof(uint32_t); }
  void require_size(size_t n, const char* what) const {
    if (n != n_)
      throw InternalError(std::string("DeviceBuffer ") + what + " of " + std::to_string(n) +
                          " elements into a buffer of " + std::to_string(n_));
  }
  void release() noexcept {
    if (ptr_) (void)hipFree(ptr_);
    ptr_ = nullptr;
    n_ = 0;
  }

  T* ptr_ = nullptr;
  size_t n_ = 0;
};

}  // namespace qsa::gpu
