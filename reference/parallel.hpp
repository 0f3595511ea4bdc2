// Row-parallel loops. An exception may not leave an OpenMP region (that
// terminates the process), yet bad input found inside a row must become an
// InputError. parallel_for catches per iteration and rethrows the exception
// of the lowest failing index, so the message is the same for every thread
// count and schedule.
#pragma once

#include <cstdint>
#include <exception>
#include <limits>

namespace qsa {

template <class Body>
void parallel_for(int64_t n, Body&& body) {
  int64_t first_failure = std::numeric_limits<int64_t>::max();
  std::exception_ptr error;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
#pragma omp critical(qsa_parallel_for_error)
      if (i < first_failure) {
        first_failure = i;
        error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace qsa
