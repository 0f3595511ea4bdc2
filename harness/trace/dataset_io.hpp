// Typed dataset reading and writing for trace v1. The reader checks rank,
// dtype class and a running memory budget from the dataset's header before it
// allocates anything, so a corrupt or hostile dataspace cannot make it
// allocate what it claims.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "harness/trace/h5_file.hpp"
#include "harness/trace/h5_types.hpp"
#include "harness/trace/trace_io.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::h5 {

class DatasetReader {
 public:
  // Every read is charged 8 bytes per element (the fp64 or int64 it becomes)
  // against max_bytes.
  DatasetReader(hid_t file, int64_t max_bytes) : file_(file), max_bytes_(max_bytes) {}

  bool exists(const std::string& path) const { return path_exists(file_, path); }

  // `path` is absolute ("/steps/000003/hidden"); `ranks` lists the accepted
  // ranks and `expected` describes the shape for messages ("[T, hidden]").
  // bf16 and float16 are decoded from their bits, float32/float64 read as
  // double, uint8 with an `encoding` attribute decoded as fp8 codes.
  TensorD floats(const std::string& path, std::initializer_list<int> ranks, const std::string& expected);
  // Any integer width; a float dataset is an InputError.
  TensorI64 ints64(const std::string& path, std::initializer_list<int> ranks, const std::string& expected);
  // As ints64, then every value must fit int32.
  TensorI32 ints32(const std::string& path, std::initializer_list<int> ranks, const std::string& expected);

  int64_t bytes_charged() const { return used_bytes_; }

 private:
  struct Opened {
    Handle dataset;
    TypeInfo type;
    Shape shape;
    int64_t numel = 0;
  };
  Opened open(const std::string& path, std::initializer_list<int> ranks, const std::string& expected);
  void read_into(const Opened& d, const std::string& path, hid_t mem_type, void* buffer);

  hid_t file_;
  int64_t max_bytes_;
  int64_t used_bytes_ = 0;
};

// Writes `t` (rank >= 1, possibly with zero rows). When `fp8` is given and
// every value is exactly an fp8 value of that flavour (NaN included), stores
// uint8 codes with an `encoding` attribute; otherwise as `storage` says.
void write_floats(hid_t loc, const std::string& name, const TensorD& t, FloatStorage storage,
                  std::optional<Fp8Flavor> fp8 = std::nullopt);
void write_ints32(hid_t loc, const std::string& name, const Shape& shape, const int32_t* data);
void write_ints64(hid_t loc, const std::string& name, const Shape& shape, const int64_t* data);

// The stored fp8 flavour of a uint8 dataset (its `encoding` attribute), if any.
std::optional<std::string> dataset_encoding(hid_t dataset, const std::string& path);

}  // namespace qsa::h5
