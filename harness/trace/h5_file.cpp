#include "harness/trace/h5_file.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <utility>

namespace qsa::h5 {

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    closer_ = std::exchange(other.closer_, nullptr);
  }
  return *this;
}

herr_t Handle::reset() {
  herr_t status = 0;
  if (id_ >= 0 && closer_ != nullptr) status = closer_(id_);
  id_ = H5I_INVALID_HID;
  closer_ = nullptr;
  return status;
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_); }

namespace {

herr_t collect_error(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (err != nullptr && err->desc != nullptr && err->desc[0] != '\0') out->emplace_back(err->desc);
  return 0;
}

}  // namespace

std::string error_stack_text() {
  std::vector<std::string> descs;  // outermost (the API call) first
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &descs);
  H5Eclear2(H5E_DEFAULT);
  if (descs.empty()) return "HDF5 reported no reason";
  // The outermost entry says what failed, the innermost why.
  if (descs.size() == 1 || descs.front() == descs.back()) return descs.front();
  return descs.front() + " (" + descs.back() + ")";
}

hid_t check_id(hid_t id, const std::string& what) {
  if (id < 0) throw IoError(what + ": " + error_stack_text());
  return id;
}

herr_t check(herr_t status, const std::string& what) {
  if (status < 0) throw IoError(what + ": " + error_stack_text());
  return status;
}

Handle own_file(hid_t id) { return Handle(id, H5Fclose); }
Handle own_group(hid_t id) { return Handle(id, H5Gclose); }
Handle own_dataset(hid_t id) { return Handle(id, H5Dclose); }
Handle own_space(hid_t id) { return Handle(id, H5Sclose); }
Handle own_type(hid_t id) { return Handle(id, H5Tclose); }
Handle own_attr(hid_t id) { return Handle(id, H5Aclose); }
Handle own_plist(hid_t id) { return Handle(id, H5Pclose); }

std::string quoted(const std::string& path) { return "'" + path + "'"; }

namespace {

// Closing the file closes whatever is still open in it, so a close really
// releases the file before the writer renames it.
Handle strong_close_access() {
  Handle fapl = own_plist(check_id(H5Pcreate(H5P_FILE_ACCESS), "creating a file access list"));
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), "setting the file close degree");
  return fapl;
}

}  // namespace

Handle open_file_read(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    throw IoError(fmt::format("cannot open {}: no such file", quoted(path)));
  if (std::filesystem::is_directory(status))
    throw IoError(fmt::format("cannot open {}: it is a directory", quoted(path)));
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0)
    throw IoError(fmt::format("cannot open {}: {}", quoted(path), error_stack_text()));
  if (is_hdf5 == 0)
    throw IoError(fmt::format("cannot open {}: not an HDF5 file (no HDF5 signature)", quoted(path)));
  const Handle fapl = strong_close_access();
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (id < 0)
    throw IoError(fmt::format("cannot open {}: the file is truncated or corrupt: {}", quoted(path),
                              error_stack_text()));
  return own_file(id);
}

Handle create_file(const std::string& path) {
  const Handle fapl = strong_close_access();
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
  return own_file(check_id(id, fmt::format("cannot create {}", quoted(path))));
}

Handle open_file_write(const std::string& path) {
  const Handle fapl = strong_close_access();
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get());
  return own_file(check_id(id, fmt::format("cannot open {} for writing", quoted(path))));
}

bool path_exists(hid_t loc, const std::string& path) {
  std::string prefix;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty()) continue;
    prefix += (prefix.empty() && path[0] != '/' ? "" : "/") + part;
    const htri_t exists = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
    check(exists, "looking up " + prefix);
    if (exists == 0) return false;
  }
  return true;
}

Handle create_group(hid_t loc, const std::string& name) {
  const hid_t id = H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  return own_group(check_id(id, "creating group " + name));
}

Handle open_group(hid_t loc, const std::string& name) {
  return own_group(check_id(H5Gopen2(loc, name.c_str(), H5P_DEFAULT), "opening group " + name));
}

Handle open_dataset(hid_t loc, const std::string& name) {
  return own_dataset(check_id(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "opening dataset " + name));
}

std::vector<hsize_t> dataspace_dims(hid_t space) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_NO_CLASS) check(-1, "reading a dataspace");
  if (cls != H5S_SIMPLE) return {};
  const int rank = check(H5Sget_simple_extent_ndims(space), "reading a dataspace's rank");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "reading a dataspace's extent");
  return dims;
}

}  // namespace qsa::h5
