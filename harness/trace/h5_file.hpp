// A thin RAII layer over the HDF5 C API for the trace reader and writer.
// Every call is checked; HDF5's own error stack is turned into the message of
// an IoError (the file could not be read or written) so that a truncated or
// corrupt file reports HDF5's reason next to the file name. Content problems
// (a missing attribute, a wrong dtype) are InputErrors raised by the callers.
// Only HDF5 1.10 APIs are used (Debian 12 ships 1.10.8).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reference/core/errors.hpp"

namespace qsa::h5 {

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept { *this = std::move(other); }
  Handle& operator=(Handle&& other) noexcept;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports a failing close (H5Fclose flushes the file).
  herr_t reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Turns off HDF5's automatic printing of its error stack for the lifetime of
// the object (restoring the previous handler after), so failures surface only
// through our exceptions.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

// HDF5's current error stack in one line ("unable to open file (truncated
// file: eof = ...)"), then clears it.
std::string error_stack_text();

// Throw IoError("<what>: <HDF5's reason>") when an HDF5 call failed.
hid_t check_id(hid_t id, const std::string& what);
herr_t check(herr_t status, const std::string& what);

// Wrap a freshly created/opened id in a Handle with the right closer.
Handle own_file(hid_t id);
Handle own_group(hid_t id);
Handle own_dataset(hid_t id);
Handle own_space(hid_t id);
Handle own_type(hid_t id);
Handle own_attr(hid_t id);
Handle own_plist(hid_t id);

// "'x.h5'", the way messages name a file.
std::string quoted(const std::string& path);

// IoError for a missing file, a file that is not HDF5 and one HDF5 cannot
// open (truncated, corrupt); the message names the file.
Handle open_file_read(const std::string& path);
Handle create_file(const std::string& path);  // truncates
// Read-write, for tools and tests that patch an existing file.
Handle open_file_write(const std::string& path);

// Whether every component of a '/'-separated path exists below loc (H5Lexists
// alone fails when an intermediate group is missing).
bool path_exists(hid_t loc, const std::string& path);

Handle create_group(hid_t loc, const std::string& name);
Handle open_group(hid_t loc, const std::string& name);
Handle open_dataset(hid_t loc, const std::string& name);

// The current dataspace extent; rank 0 for scalar and null spaces.
std::vector<hsize_t> dataspace_dims(hid_t space);

}  // namespace qsa::h5
