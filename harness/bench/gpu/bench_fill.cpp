#include "harness/bench/gpu/bench_fill.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "harness/bench/gpu/gpu_env.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"

namespace qsa::bench {

namespace {

// The device table of one kind, uploaded on first use and kept for the run.
const void* device_table(FillKind kind) {
  static std::map<FillKind, std::unique_ptr<gpu::DeviceBuffer<uint8_t>>> tables;
  auto& slot = tables[kind];
  if (!slot) {
    const size_t n = size_t{1} << kFillTableBits;
    const size_t e = fill_element_bytes(kind);
    std::vector<uint8_t> bytes(n * e);
    const CounterRng rng(gpu_env().seed, "bench.fill.table");
    for (size_t i = 0; i < n; ++i) {
      const double x = rng.normal(i);
      if (kind == FillKind::kF32) {
        const auto f = static_cast<float>(round_bf16(x));
        std::memcpy(&bytes[4 * i], &f, 4);  // host and device share the byte order
      } else if (kind == FillKind::kBf16) {
        const uint16_t b = bf16_bits(x);
        bytes[2 * i] = static_cast<uint8_t>(b & 0xff);  // little-endian, as the device reads uint16_t
        bytes[2 * i + 1] = static_cast<uint8_t>(b >> 8);
      } else {
        bytes[i] = fp8_encode(x, kind == FillKind::kFp8E4m3fnuz ? Fp8Flavor::kE4m3fnuz : Fp8Flavor::kE4m3fn);
      }
    }
    slot = std::make_unique<gpu::DeviceBuffer<uint8_t>>(bytes);
  }
  return slot->get();
}

}  // namespace

FillKind fill_kind(IndexerDtype dtype, Fp8Flavor flavor) {
  if (dtype == IndexerDtype::kBf16) return FillKind::kBf16;
  return flavor == Fp8Flavor::kE4m3fnuz ? FillKind::kFp8E4m3fnuz : FillKind::kFp8E4m3fn;
}

FillKind fill_kind(KvDtype dtype, Fp8Flavor flavor) {
  if (dtype == KvDtype::kBf16) return FillKind::kBf16;
  if (dtype != KvDtype::kFp8) throw ConfigError("benchmark fill: KV dtype " + to_string(dtype) + " is not bf16 or fp8");
  return flavor == Fp8Flavor::kE4m3fnuz ? FillKind::kFp8E4m3fnuz : FillKind::kFp8E4m3fn;
}

size_t fill_element_bytes(FillKind kind) {
  switch (kind) {
    case FillKind::kF32: return 4;
    case FillKind::kBf16: return 2;
    default: return 1;
  }
}

uint64_t fill_key(std::string_view tensor, int copy) {
  return counter_bits(gpu_env().seed, stream_id(tensor), static_cast<uint64_t>(copy));
}

void fill_random(void* dst, size_t count, FillKind kind, uint64_t key, hipStream_t stream) {
  launch_fill_from_table(dst, count, fill_element_bytes(kind), device_table(kind), key, stream);
}

}  // namespace qsa::bench
