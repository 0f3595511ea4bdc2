// Shared by the tests that break trace files (trace_bad_input_test.cpp,
// adversarial_trace_test.cpp): a fixture that writes a valid trace into a
// scratch directory and patches the written file through the HDF5 wrapper,
// the expectation that a call throws a given typed error naming the problem,
// and the two patch primitives both suites use.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/trace/h5_file.hpp"
#include "harness/trace/trace_io.hpp"
#include "tests/harness/trace_test_support.hpp"

namespace qsa::testing_support {

// fn must throw E (not an InternalError, which would be a bug, not bad input)
// whose message contains every substring.
template <class E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& substrings) {
  try {
    fn();
    ADD_FAILURE() << "no error was thrown";
  } catch (const QsaError& e) {
    if (dynamic_cast<const E*>(&e) == nullptr || e.kind() == ErrorKind::kInternal)
      ADD_FAILURE() << "wrong error kind " << static_cast<int>(e.kind()) << ": " << e.what();
    for (const std::string& s : substrings)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << "'" << s << "' missing from: " << e.what();
  }
}

inline void remove_link(hid_t f, const std::string& path) {
  h5::check(H5Ldelete(f, path.c_str(), H5P_DEFAULT), path);
}

// Replaces (or creates) `path` with a dataset of the given shape (scalar when
// dims is empty) and HDF5 type; data may be null to leave it unwritten.
inline void put_dataset(hid_t f, const std::string& path, const std::vector<hsize_t>& dims, hid_t type,
                        const void* data, hid_t dcpl = H5P_DEFAULT) {
  if (h5::path_exists(f, path)) remove_link(f, path);
  const h5::Handle space = h5::own_space(h5::check_id(
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      path));
  const h5::Handle d = h5::own_dataset(
      h5::check_id(H5Dcreate2(f, path.c_str(), type, space.get(), H5P_DEFAULT, dcpl, H5P_DEFAULT), path));
  if (data != nullptr) h5::check(H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), path);
}

class TraceFileTest : public ::testing::Test {
 protected:
  Trace valid() const { return make_trace(kTraceSeed, Values::kBf16Exact); }

  std::string write(const Trace& t, const std::string& name = "t.h5") {
    const std::string file = dir_.file(name);
    write_trace(t, file, {FloatStorage::kAuto, true});
    return file;
  }

  // Writes a valid trace and lets `patch` edit the file in place.
  std::string patched(const std::function<void(hid_t)>& patch) {
    const std::string file = write(valid());
    h5::Handle f = h5::open_file_write(file);
    patch(f.get());
    h5::check(f.reset(), "closing the patched file");
    return file;
  }

  template <class E>
  void expect_read_error(const std::string& file, const std::vector<std::string>& substrings,
                         const TraceReadOptions& options = {}) {
    expect_error<E>([&] { read_trace(file, options); }, substrings);
  }

  template <class E>
  void expect_rejected(const Trace& t, const std::vector<std::string>& substrings) {
    expect_read_error<E>(write(t), substrings);
  }

  ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, "seed " + std::to_string(kTraceSeed)};
  ScratchDir dir_;
};

}  // namespace qsa::testing_support
