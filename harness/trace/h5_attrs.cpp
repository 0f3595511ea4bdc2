#include "harness/trace/h5_attrs.hpp"

#include <fmt/format.h>

#include "harness/trace/h5_file.hpp"
#include "harness/trace/h5_heap_string.hpp"
#include "harness/trace/h5_types.hpp"
#include "reference/core/errors.hpp"

namespace qsa::h5 {

namespace {

void write_attr(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type,
                const std::vector<hsize_t>& dims, const void* data) {
  const std::string what = "writing attribute " + name;
  const Handle space = own_space(check_id(
      dims.empty() ? H5Screate(H5S_SCALAR)
                   : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      what));
  const Handle attr =
      own_attr(check_id(H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), what));
  check(H5Awrite(attr.get(), mem_type, data), what);
}

// An open attribute with its type and element count, or InputError when absent.
struct OpenAttr {
  Handle attr;
  Handle type;
  TypeInfo info;
  hsize_t count = 0;
  std::string label;  // "/config attribute rope_style"
};

OpenAttr open_attr(hid_t obj, const std::string& where, const std::string& name) {
  OpenAttr a;
  a.label = where + " attribute " + name;
  if (!has_attr(obj, name)) throw InputError(fmt::format("{} has no attribute '{}'", where, name));
  a.attr = own_attr(check_id(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "opening " + a.label));
  a.type = own_type(check_id(H5Aget_type(a.attr.get()), "reading the type of " + a.label));
  a.info = describe_type(a.type.get());
  const Handle space = own_space(check_id(H5Aget_space(a.attr.get()), "reading the space of " + a.label));
  const std::vector<hsize_t> dims = dataspace_dims(space.get());
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) check(-1, "reading the size of " + a.label);
  a.count = static_cast<hsize_t>(n);
  if (dims.size() > 1)
    throw InputError(fmt::format("{} has rank {}, expected a scalar or a list", a.label, dims.size()));
  return a;
}

void require_single(const OpenAttr& a) {
  if (a.count != 1)
    throw InputError(fmt::format("{} holds {} values, expected one", a.label, a.count));
}

void require_integer(const OpenAttr& a, const char* expected) {
  if (!a.info.is_integer())
    throw InputError(fmt::format("{} has dtype {}, expected {}{}", a.label, a.info.name, expected,
                                 a.info.name == "enum" ? " (h5py stores a Python bool as an enum: write int 0/1)" : ""));
}

}  // namespace

void write_attr_string(hid_t obj, const std::string& name, const std::string& value) {
  const Handle type = utf8_string_type();
  const char* ptr = value.c_str();
  write_attr(obj, name, type.get(), type.get(), {}, &ptr);
}

void write_attr_int(hid_t obj, const std::string& name, int64_t value) {
  write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, {}, &value);
}

void write_attr_uint64(hid_t obj, const std::string& name, uint64_t value) {
  write_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, {}, &value);
}

void write_attr_double(hid_t obj, const std::string& name, double value) {
  write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, &value);
}

void write_attr_ints(hid_t obj, const std::string& name, const std::vector<int64_t>& values) {
  write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, {values.size()}, values.data());
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t exists = H5Aexists(obj, name.c_str());
  check(exists, "looking up attribute " + name);
  return exists > 0;
}

std::string read_attr_string(hid_t obj, const std::string& where, const std::string& name) {
  const OpenAttr a = open_attr(obj, where, name);
  if (a.info.kind != TypeKind::kString)
    throw InputError(fmt::format("{} has dtype {}, expected a string", a.label, a.info.name));
  require_single(a);
  const htri_t variable = H5Tis_variable_str(a.type.get());
  check(variable, "reading the type of " + a.label);
  // Not through HDF5's global-heap reader, which trusts the file (h5_heap_string.hpp).
  if (variable > 0) return read_vlen_string_attr(a.attr.get(), a.label);
  // Fixed-length: read as stored, then cut at the first NUL (null padding).
  // The size comes from the file's datatype message: cap it before allocating.
  if (a.info.size > kMaxStringBytes)
    throw InputError(fmt::format("{} is a fixed-length string of {} bytes (at most {} are read)", a.label,
                                 a.info.size, kMaxStringBytes));
  std::string buffer(a.info.size, '\0');
  check(H5Aread(a.attr.get(), a.type.get(), buffer.data()), "reading " + a.label);
  return buffer.substr(0, buffer.find('\0'));
}

int64_t read_attr_int(hid_t obj, const std::string& where, const std::string& name) {
  const OpenAttr a = open_attr(obj, where, name);
  require_integer(a, "an integer");
  require_single(a);
  if (a.info.kind == TypeKind::kUnsignedInt && a.info.size == 8) {
    uint64_t u = 0;
    check(H5Aread(a.attr.get(), H5T_NATIVE_UINT64, &u), "reading " + a.label);
    if (u > static_cast<uint64_t>(INT64_MAX))
      throw InputError(fmt::format("{} = {} is out of range", a.label, u));
    return static_cast<int64_t>(u);
  }
  int64_t v = 0;
  check(H5Aread(a.attr.get(), H5T_NATIVE_INT64, &v), "reading " + a.label);
  return v;
}

uint64_t read_attr_uint64(hid_t obj, const std::string& where, const std::string& name) {
  const OpenAttr a = open_attr(obj, where, name);
  require_integer(a, "an unsigned integer");
  require_single(a);
  if (a.info.kind == TypeKind::kSignedInt) {
    int64_t v = 0;
    check(H5Aread(a.attr.get(), H5T_NATIVE_INT64, &v), "reading " + a.label);
    if (v < 0) throw InputError(fmt::format("{} = {} is negative", a.label, v));
    return static_cast<uint64_t>(v);
  }
  uint64_t u = 0;
  check(H5Aread(a.attr.get(), H5T_NATIVE_UINT64, &u), "reading " + a.label);
  return u;
}

double read_attr_double(hid_t obj, const std::string& where, const std::string& name) {
  const OpenAttr a = open_attr(obj, where, name);
  if (!a.info.is_float() && !a.info.is_integer())
    throw InputError(fmt::format("{} has dtype {}, expected a number", a.label, a.info.name));
  require_single(a);
  double v = 0;
  check(H5Aread(a.attr.get(), H5T_NATIVE_DOUBLE, &v), "reading " + a.label);
  return v;
}

std::vector<int64_t> read_attr_ints(hid_t obj, const std::string& where, const std::string& name,
                                    size_t count) {
  const OpenAttr a = open_attr(obj, where, name);
  require_integer(a, "integers");
  if (a.count != count)
    throw InputError(fmt::format("{} holds {} values, expected {}", a.label, a.count, count));
  std::vector<int64_t> values(count);
  check(H5Aread(a.attr.get(), H5T_NATIVE_INT64, values.data()), "reading " + a.label);
  return values;
}

}  // namespace qsa::h5
