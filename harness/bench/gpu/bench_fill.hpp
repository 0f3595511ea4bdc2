// Fresh random device data for the benchmarks, at device speed: a table of
// 4096 samples of N(0, 1) drawn with qsa::CounterRng and encoded with the
// reference's codecs (bf16, fp8 e4m3fn / e4m3fnuz; fp32 holding bf16 values,
// as projection outputs are), from which a device
// kernel picks element i by hashing (key, i) with CounterRng's finaliser.
// Never zeros, never NaN, and a different key gives different data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/common/device_api.hpp"
#include "reference/core/config.hpp"

namespace qsa::bench {

enum class FillKind { kBf16, kFp8E4m3fn, kFp8E4m3fnuz, kF32 };

// Table entries; a power of two (the kernel takes the hash's top bits).
inline constexpr int kFillTableBits = 12;

FillKind fill_kind(IndexerDtype dtype, Fp8Flavor flavor);
FillKind fill_kind(KvDtype dtype, Fp8Flavor flavor);  // bf16 or fp8
size_t fill_element_bytes(FillKind kind);

// A key for the named tensor of input set `copy`, derived from the run's seed.
uint64_t fill_key(std::string_view tensor, int copy);

// Fills `count` elements (of fill_element_bytes(kind)) at dst on `stream`.
void fill_random(void* dst, size_t count, FillKind kind, uint64_t key, hipStream_t stream);

// The device side (bench_fill.hip): dst[i] = table[hash(key, i) >> (64 - kFillTableBits)]
// for 1-, 2- or 4-byte elements.
void launch_fill_from_table(void* dst, size_t count, size_t element_bytes, const void* table, uint64_t key,
                            hipStream_t stream);

}  // namespace qsa::bench
