// A minimal owning row-major tensor. The reference keeps values in fp64 (or
// integer ids); shapes travel with the data so that traces, diffs and kernels
// agree on layout without side tables.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <vector>

#include "reference/core/errors.hpp"

namespace qsa {

using Shape = std::vector<int64_t>;

inline int64_t shape_numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

std::string shape_to_string(const Shape& s);

template <class T>
struct Tensor {
  Shape shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(Shape s, T fill = T{}) : shape(std::move(s)), data(shape_numel(shape), fill) {}

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape.at(i); }
  bool empty() const { return data.empty(); }

  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }

  // Row-major strided access; debug builds check the bounds.
  T& at(int64_t i) { return data[i]; }
  const T& at(int64_t i) const { return data[i]; }
  T& at(int64_t i, int64_t j) { return data[offset2(i, j)]; }
  const T& at(int64_t i, int64_t j) const { return data[offset2(i, j)]; }
  T& at(int64_t i, int64_t j, int64_t k) { return data[offset3(i, j, k)]; }
  const T& at(int64_t i, int64_t j, int64_t k) const { return data[offset3(i, j, k)]; }

  // Pointer to the start of row i of the leading dimension.
  T* row(int64_t i) { return data.data() + i * (numel() / shape[0]); }
  const T* row(int64_t i) const { return data.data() + i * (numel() / shape[0]); }

 private:
  int64_t offset2(int64_t i, int64_t j) const {
    QSA_ASSERT(rank() == 2 && i >= 0 && i < shape[0] && j >= 0 && j < shape[1]);
    return i * shape[1] + j;
  }
  int64_t offset3(int64_t i, int64_t j, int64_t k) const {
    QSA_ASSERT(rank() == 3 && i >= 0 && i < shape[0] && j >= 0 && j < shape[1] && k >= 0 &&
               k < shape[2]);
    return (i * shape[1] + j) * shape[2] + k;
  }
};

using TensorD = Tensor<double>;
using TensorI32 = Tensor<int32_t>;
using TensorI64 = Tensor<int64_t>;

// Throws InputError naming `what` when `t` does not have shape `expected`.
template <class T>
void require_shape(const Tensor<T>& t, const Shape& expected, const std::string& what) {
  if (t.shape != expected) {
    throw InputError(what + " has shape " + shape_to_string(t.shape) + ", expected " +
                     shape_to_string(expected));
  }
}

}  // namespace qsa
