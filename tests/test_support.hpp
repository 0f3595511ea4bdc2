// Helpers every test suite uses: fresh random tensors from named
// counter-based streams, and the message of an expected InputError.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "reference/core/errors.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::test {

// N(0, sigma^2) values from the stream (seed, name); the same on every machine.
inline TensorD random_normal(const Shape& shape, uint64_t seed, std::string_view name, double sigma = 1.0) {
  TensorD t(shape);
  const CounterRng rng(seed, name);
  for (int64_t i = 0; i < t.numel(); ++i) t.data[i] = sigma * rng.normal(static_cast<uint64_t>(i));
  return t;
}

// Runs fn, which must throw InputError, and returns the message.
template <class Fn>
std::string input_error_message(Fn fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

}  // namespace qsa::test
