// One device allocation for a tensor of every input set: set k lives at
// k · per_copy elements. Index inputs are built on the host set by set and
// uploaded once; value inputs are filled on the device (bench_fill.hpp).
// One allocation instead of one per set keeps thousands of small input sets
// (tiny kernels rotate up to kMaxCopies of them) cheap to make.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "harness/bench/gpu/bench_fill.hpp"
#include "harness/bench/gpu/gpu_env.hpp"

namespace qsa::bench {

template <class T>
class Slab {
 public:
  // Host side: append the next set (all sets have the same size).
  void add(const std::vector<T>& v) {
    if (sets_ == 0) per_copy_ = v.size();
    if (v.size() != per_copy_)
      throw InternalError("benchmark slab: input set of " + std::to_string(v.size()) + " elements, expected " +
                          std::to_string(per_copy_));
    host_.insert(host_.end(), v.begin(), v.end());
    ++sets_;
  }
  void upload() {
    dev_ = gpu::DeviceBuffer<T>(host_);
    host_ = std::vector<T>();
  }
  // Device side: `sets` sets of `per_copy` elements, uninitialised.
  void allocate(int sets, size_t per_copy) {
    sets_ = sets;
    per_copy_ = per_copy;
    dev_ = gpu::DeviceBuffer<T>(static_cast<size_t>(sets) * per_copy);
  }
  // Random values of `kind` over the whole allocation (a byte slab holds
  // elements of any size).
  void fill(FillKind kind, std::string_view name) {
    fill_random(dev_.get(), dev_.bytes() / fill_element_bytes(kind), kind, fill_key(name, 0), gpu_env().stream);
  }

  T* at(int k) { return dev_.get() + static_cast<size_t>(k) * per_copy_; }
  size_t per_copy() const { return per_copy_; }

 private:
  std::vector<T> host_;
  gpu::DeviceBuffer<T> dev_;
  size_t per_copy_ = 0;
  int sets_ = 0;
};

// Byte budget of a shared pool (KV cache, compressed cache): big enough that
// requests of one launch rarely share a page, small enough to fill quickly.
inline constexpr double kPoolBytes = 16.0 * (1ull << 30);

}  // namespace qsa::bench
