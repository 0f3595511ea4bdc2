#include "harness/fuzz/trace_fuzzer.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/trace/trace_io.hpp"
#include "reference/core/errors.hpp"

namespace {

// Below libFuzzer's default 2 GiB RSS limit with room for HDF5's own
// allocations: an input claiming more than this must be refused, never read.
constexpr int64_t kMaxTraceBytes = int64_t{64} << 20;

// One file per process (libFuzzer's -fork and -jobs run several), in $TMPDIR:
// the loader reads paths, and a real file exercises exactly what `qsa` does.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/qsa-trace-fuzz-" +
           std::to_string(::getpid()) + ".h5";
  }();
  return path;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();  // the harness, not the input, is broken
  }
}

// Typed errors are the loader's contract for bad input; an InternalError
// means qsa broke its own invariant on some input, which is a bug.
template <class Fn>
void expect_typed(const char* what, Fn fn) {
  try {
    fn();
  } catch (const qsa::InternalError& e) {
    std::fprintf(stderr, "qsa trace fuzzer: %s raised an InternalError: %s\n", what, e.what());
    std::abort();
  } catch (const qsa::QsaError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  write_file(path, data, size);
  qsa::TraceReadOptions options;
  options.max_bytes = kMaxTraceBytes;
  expect_typed("read_trace", [&] {
    const qsa::Trace trace = qsa::read_trace(path, options);
    qsa::validate_trace(trace, "fuzz");  // what a caller holding a Trace runs again
  });
  expect_typed("list_datasets", [&] { qsa::list_datasets(path); });
  std::remove(path.c_str());
  return 0;
}
