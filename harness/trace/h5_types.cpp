#include "harness/trace/h5_types.hpp"

#include <fmt/format.h>

namespace qsa::h5 {

namespace {

// HDF5 checks each field against the current precision and size, so the
// fields and precision shrink first and the size last.
Handle float16_layout(size_t mantissa_bits, size_t exponent_bits, size_t bias, const char* name) {
  const std::string what = fmt::format("building the {} datatype", name);
  Handle t = own_type(check_id(H5Tcopy(H5T_IEEE_F32LE), what));
  check(H5Tset_fields(t.get(), 15, mantissa_bits, exponent_bits, 0, mantissa_bits), what);
  check(H5Tset_precision(t.get(), 16), what);
  check(H5Tset_offset(t.get(), 0), what);
  check(H5Tset_size(t.get(), 2), what);
  check(H5Tset_ebias(t.get(), bias), what);
  return t;
}

}  // namespace

Handle bf16_type() { return float16_layout(7, 8, 127, "bf16"); }
Handle fp16_type() { return float16_layout(10, 5, 15, "float16"); }

Handle utf8_string_type() {
  Handle t = own_type(check_id(H5Tcopy(H5T_C_S1), "building the string datatype"));
  check(H5Tset_size(t.get(), H5T_VARIABLE), "building the string datatype");
  check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "building the string datatype");
  return t;
}

TypeInfo describe_type(hid_t type) {
  TypeInfo info;
  info.size = H5Tget_size(type);
  if (info.size == 0) check(-1, "reading a datatype's size");
  const H5T_class_t cls = H5Tget_class(type);
  switch (cls) {
    case H5T_FLOAT: {
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      check(H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize), "reading a float type's fields");
      const size_t precision = H5Tget_precision(type);
      if (info.size == 2 && precision == 16 && esize == 8 && msize == 7) {
        info.kind = TypeKind::kBf16;
        info.name = "bf16";
      } else if (info.size == 2 && precision == 16 && esize == 5 && msize == 10) {
        info.kind = TypeKind::kFloat16;
        info.name = "float16";
      } else if (info.size == 4 && esize == 8 && msize == 23) {
        info.kind = TypeKind::kFloat32;
        info.name = "float32";
      } else if (info.size == 8 && esize == 11 && msize == 52) {
        info.kind = TypeKind::kFloat64;
        info.name = "float64";
      } else {
        info.kind = TypeKind::kOtherFloat;
        info.name = fmt::format("float ({} bits, {} exponent bits)", precision, esize);
      }
      return info;
    }
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      info.kind = is_signed ? TypeKind::kSignedInt : TypeKind::kUnsignedInt;
      info.name = fmt::format("{}int{}", is_signed ? "" : "u", 8 * info.size);
      return info;
    }
    case H5T_STRING:
      info.kind = TypeKind::kString;
      info.name = "string";
      return info;
    case H5T_ENUM: info.name = "enum"; return info;
    case H5T_COMPOUND: info.name = "compound"; return info;
    case H5T_ARRAY: info.name = "array"; return info;
    case H5T_VLEN: info.name = "vlen"; return info;
    case H5T_BITFIELD: info.name = "bitfield"; return info;
    case H5T_OPAQUE: info.name = "opaque"; return info;
    case H5T_REFERENCE: info.name = "reference"; return info;
    case H5T_TIME: info.name = "time"; return info;
    default:
      check(-1, "reading a datatype's class");
      return info;
  }
}

}  // namespace qsa::h5
