// HDF5 I/O for trace v1 (docs/trace-format.md). Everything a file could get
// wrong becomes an InputError or IoError naming the dataset or attribute;
// nothing reads out of bounds or allocates what a corrupt header claims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/trace/trace.hpp"

namespace qsa {

struct TraceReadOptions {
  // Upper bound on the bytes one trace may make the reader allocate (as
  // fp64); a dataset whose dataspace claims more is rejected before reading.
  int64_t max_bytes = int64_t{16} << 30;
  bool load_outputs = true;  // false skips steps' recorded outputs
};

// kAuto is lossless (bf16 when every value is bf16-representable, else
// float64); kBf16 and kFloat32 round every value to nearest-even and so lose
// precision for data off their grid. fp8 indexer values are stored as codes
// whatever this says (docs/trace-format.md).
enum class FloatStorage { kAuto, kBf16, kFloat32, kFloat64 };

struct TraceWriteOptions {
  FloatStorage floats = FloatStorage::kAuto;  // auto: bf16 when exact, else float64
  bool overwrite = false;                     // replace an existing file
};

Trace read_trace(const std::string& path, const TraceReadOptions& options = {});

// Atomic: writes path + ".tmp-<pid>" then renames. IoError when the file
// exists and !options.overwrite.
void write_trace(const Trace& trace, const std::string& path, const TraceWriteOptions& options = {});

// Consistency of a trace in memory (what read_trace also runs): config,
// weights, every step's metadata (via derive_step_layout), hidden shape and
// finiteness, recorded output shapes, initial state shapes and ranges.
void validate_trace(const Trace& trace, const std::string& source = "trace");

// One dataset as stored, for `qsa inspect`.
struct DatasetInfo {
  std::string path;      // "/steps/000003/outputs/q"
  Shape shape;
  std::string dtype;     // "bf16", "float32", "float64", "int32", "int64", "uint8 (e4m3fn)", ...
  int64_t stored_bytes;  // on disk
};
std::vector<DatasetInfo> list_datasets(const std::string& path);

}  // namespace qsa
