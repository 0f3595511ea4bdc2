#include "harness/trace/dataset_io.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in ranges.h from fmt 11 on)

#include <cmath>
#include <limits>
#include <vector>

#include "harness/trace/h5_attrs.hpp"
#include "reference/core/float_formats.hpp"

namespace qsa::h5 {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kBytesPerElement = 8;  // everything becomes fp64 or int64 in memory

// Elements a dataspace claims, saturating at INT64_MAX (a corrupt header can
// claim up to 2^64 per dimension).
int64_t claimed_elements(const std::vector<hsize_t>& dims) {
  for (hsize_t d : dims)
    if (d == 0) return 0;
  uint64_t n = 1;
  for (hsize_t d : dims) {
    if (n > static_cast<uint64_t>(kInt64Max) / d) return kInt64Max;
    n *= d;
  }
  return static_cast<int64_t>(n);
}

std::string dims_to_string(const std::vector<hsize_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

std::string ranks_to_string(std::initializer_list<int> ranks) {
  return fmt::format("{}", fmt::join(ranks, " or "));
}

// Bitwise equality up to NaN payloads: -0 and +0 differ (fnuz has no -0).
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

bool all_fp8_exact(const TensorD& t, Fp8Flavor flavor) {
  for (double x : t.data)
    if (!same_value(x, fp8_decode(fp8_encode(x, flavor), flavor))) return false;
  return true;
}

bool all_bf16_exact(const TensorD& t) {
  for (double x : t.data)
    if (!std::isnan(x) && round_bf16(x) != x) return false;
  return true;
}

Handle write_dataset(hid_t loc, const std::string& name, const Shape& shape, hid_t file_type,
                     hid_t mem_type, const void* data) {
  const std::string what = "writing dataset " + name;
  if (shape.empty()) throw InternalError(what + ": a dataset needs rank >= 1");
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  const Handle space =
      own_space(check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), what));
  Handle dset = own_dataset(check_id(
      H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), what));
  if (shape_numel(shape) > 0)
    check(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), what);
  return dset;
}

}  // namespace

DatasetReader::Opened DatasetReader::open(const std::string& path, std::initializer_list<int> ranks,
                                          const std::string& expected) {
  Opened d;
  const hid_t obj = H5Oopen(file_, path.c_str(), H5P_DEFAULT);
  d.dataset = Handle(check_id(obj, "opening " + path), H5Oclose);
  const H5I_type_t kind = H5Iget_type(d.dataset.get());
  if (kind != H5I_DATASET)
    throw InputError(fmt::format("{} is a {}, expected a dataset {}", path,
                                 kind == H5I_GROUP ? "group" : "named datatype", expected));
  const Handle type = own_type(check_id(H5Dget_type(d.dataset.get()), "reading the dtype of " + path));
  d.type = describe_type(type.get());
  const Handle space = own_space(check_id(H5Dget_space(d.dataset.get()), "reading the shape of " + path));
  const std::vector<hsize_t> dims = dataspace_dims(space.get());

  bool rank_ok = false;
  for (int r : ranks) rank_ok = rank_ok || static_cast<size_t>(r) == dims.size();
  if (!rank_ok)
    throw InputError(fmt::format("{} has rank {} (shape {}), expected rank {}: {}", path, dims.size(),
                                 dims_to_string(dims), ranks_to_string(ranks), expected));
  for (hsize_t dim : dims)
    if (dim > static_cast<hsize_t>(kInt64Max))
      throw InputError(fmt::format("{} has an impossible shape {}", path, dims_to_string(dims)));

  // The guard runs on the header alone: nothing has been allocated yet.
  d.numel = claimed_elements(dims);
  const int64_t bytes = d.numel > kInt64Max / kBytesPerElement ? kInt64Max : d.numel * kBytesPerElement;
  if (bytes > max_bytes_ - used_bytes_)
    throw InputError(fmt::format(
        "{} has shape {} ({} elements, {} bytes in memory); with the {} bytes read before it that "
        "exceeds the memory limit of {} bytes (raise it with --max-memory)",
        path, dims_to_string(dims), d.numel, bytes, used_bytes_, max_bytes_));
  used_bytes_ += bytes;
  d.shape.assign(dims.begin(), dims.end());
  return d;
}

void DatasetReader::read_into(const Opened& d, const std::string& path, hid_t mem_type, void* buffer) {
  if (d.numel == 0) return;
  check(H5Dread(d.dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer), "reading " + path);
}

TensorD DatasetReader::floats(const std::string& path, std::initializer_list<int> ranks,
                              const std::string& expected) {
  const Opened d = open(path, ranks, expected);
  TensorD t;
  const auto n = static_cast<size_t>(d.numel);
  switch (d.type.kind) {
    case TypeKind::kBf16:
    case TypeKind::kFloat16: {
      // Read the bits through the same 16-bit layout (no conversion), decode exactly.
      const bool bf16 = d.type.kind == TypeKind::kBf16;
      const Handle mem = bf16 ? bf16_type() : fp16_type();
      std::vector<uint16_t> bits(n);
      read_into(d, path, mem.get(), bits.data());
      t.data.resize(n);
      for (size_t i = 0; i < n; ++i) t.data[i] = bf16 ? bf16_value(bits[i]) : fp16_value(bits[i]);
      break;
    }
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
    case TypeKind::kOtherFloat:
      t.data.resize(n);
      read_into(d, path, H5T_NATIVE_DOUBLE, t.data.data());
      break;
    default: {
      const std::optional<std::string> encoding = dataset_encoding(d.dataset.get(), path);
      if (d.type.kind != TypeKind::kUnsignedInt || d.type.size != 1 || !encoding)
        throw InputError(fmt::format(
            "{} has dtype {}, expected floats (bf16, float16, float32, float64, or uint8 fp8 codes "
            "with an 'encoding' attribute)",
            path, d.type.name));
      Fp8Flavor flavor{};
      try {
        flavor = parse_fp8_flavor(*encoding);
      } catch (const ConfigError& e) {
        throw InputError(fmt::format("{} attribute encoding: {}", path, e.what()));
      }
      std::vector<uint8_t> codes(n);
      read_into(d, path, H5T_NATIVE_UINT8, codes.data());
      t.data.resize(n);
      for (size_t i = 0; i < n; ++i) t.data[i] = fp8_decode(codes[i], flavor);
    }
  }
  t.shape = d.shape;
  return t;
}

TensorI64 DatasetReader::ints64(const std::string& path, std::initializer_list<int> ranks,
                                const std::string& expected) {
  const Opened d = open(path, ranks, expected);
  if (!d.type.is_integer())
    throw InputError(fmt::format("{} has dtype {}, expected integers", path, d.type.name));
  TensorI64 t;
  t.data.resize(static_cast<size_t>(d.numel));
  // HDF5 clamps uint64 values past INT64_MAX; the range checks reject them.
  read_into(d, path, H5T_NATIVE_INT64, t.data.data());
  t.shape = d.shape;
  return t;
}

TensorI32 DatasetReader::ints32(const std::string& path, std::initializer_list<int> ranks,
                                const std::string& expected) {
  const TensorI64 wide = ints64(path, ranks, expected);
  TensorI32 t;
  t.shape = wide.shape;
  t.data.resize(wide.data.size());
  for (size_t i = 0; i < wide.data.size(); ++i) {
    const int64_t v = wide.data[i];
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw InputError(fmt::format("{} holds {} at flat index {}, which does not fit int32", path, v, i));
    t.data[i] = static_cast<int32_t>(v);
  }
  return t;
}

std::optional<std::string> dataset_encoding(hid_t dataset, const std::string& path) {
  if (!has_attr(dataset, "encoding")) return std::nullopt;
  return read_attr_string(dataset, path, "encoding");
}

void write_floats(hid_t loc, const std::string& name, const TensorD& t, FloatStorage storage,
                  std::optional<Fp8Flavor> fp8) {
  if (fp8 && all_fp8_exact(t, *fp8)) {
    std::vector<uint8_t> codes(t.data.size());
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = fp8_encode(t.data[i], *fp8);
    const Handle d = write_dataset(loc, name, t.shape, H5T_STD_U8LE, H5T_NATIVE_UINT8, codes.data());
    write_attr_string(d.get(), "encoding", to_string(*fp8));
    return;
  }
  if (storage == FloatStorage::kAuto) storage = all_bf16_exact(t) ? FloatStorage::kBf16 : FloatStorage::kFloat64;
  switch (storage) {
    case FloatStorage::kBf16: {
      // Our own rounding (nearest-even) and the raw bits on both sides, so
      // HDF5 converts nothing.
      std::vector<uint16_t> bits(t.data.size());
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = bf16_bits(t.data[i]);
      const Handle type = bf16_type();
      write_dataset(loc, name, t.shape, type.get(), type.get(), bits.data());
      return;
    }
    case FloatStorage::kFloat32: {
      std::vector<float> values(t.data.size());
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(t.data[i]);
      write_dataset(loc, name, t.shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.data());
      return;
    }
    default:
      write_dataset(loc, name, t.shape, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, t.data.data());
  }
}

void write_ints32(hid_t loc, const std::string& name, const Shape& shape, const int32_t* data) {
  write_dataset(loc, name, shape, H5T_STD_I32LE, H5T_NATIVE_INT32, data);
}

void write_ints64(hid_t loc, const std::string& name, const Shape& shape, const int64_t* data) {
  write_dataset(loc, name, shape, H5T_STD_I64LE, H5T_NATIVE_INT64, data);
}

}  // namespace qsa::h5
