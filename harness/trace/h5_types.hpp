// The HDF5 datatypes of trace v1 and their names. bf16 and float16 are HDF5
// float types with their bit layouts (HDF5 1.10 has no predefined 16-bit
// floats); h5py reads bf16 as float32 and float16 as numpy float16.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <string>

#include "harness/trace/h5_file.hpp"

namespace qsa::h5 {

// Little-endian bf16: sign bit 15, 8 exponent bits at 7..14 (bias 127),
// 7 mantissa bits at 0..6.
Handle bf16_type();
// Little-endian IEEE binary16: sign bit 15, 5 exponent bits at 10..14 (bias
// 15), 10 mantissa bits.
Handle fp16_type();
// Variable-length UTF-8 string.
Handle utf8_string_type();

enum class TypeKind {
  kBf16,
  kFloat16,
  kFloat32,
  kFloat64,
  kOtherFloat,  // any other float layout; read through HDF5's conversion to double
  kSignedInt,
  kUnsignedInt,
  kString,
  kOther,       // enum, compound, array, ...
};

struct TypeInfo {
  TypeKind kind = TypeKind::kOther;
  size_t size = 0;   // bytes per element
  std::string name;  // "bf16", "float32", "int64", "uint8", "string", "enum", ...
  bool is_float() const {
    return kind == TypeKind::kBf16 || kind == TypeKind::kFloat16 || kind == TypeKind::kFloat32 ||
           kind == TypeKind::kFloat64 || kind == TypeKind::kOtherFloat;
  }
  bool is_integer() const { return kind == TypeKind::kSignedInt || kind == TypeKind::kUnsignedInt; }
};

TypeInfo describe_type(hid_t type);

}  // namespace qsa::h5
