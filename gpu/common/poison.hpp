// Poisoning of device outputs before a kernel runs, so a test can tell an
// element the kernel never wrote from one it wrote wrongly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qsa::gpu {

// Fills n 32-bit words at dst with `pattern` (a NaN bit pattern for floats,
// a sentinel for ids). Runs on the null stream.
void poison_words(uint32_t* dst, size_t n, uint32_t pattern);

inline constexpr uint32_t kPoisonFloat = 0x7fc0dead;  // a quiet NaN with a payload
inline constexpr uint32_t kPoisonId = 0x80000001;     // INT32_MIN + 1, never a valid id
// bf16 outputs: two copies of 0x7fad, a NaN whose payload no kernel produces
// (kernels emit only the canonical quiet NaN sign|0x7fc0).
inline constexpr uint16_t kPoisonBf16 = 0x7fad;
inline constexpr uint32_t kPoisonBf16Pair = 0x7fad7fad;

}  // namespace qsa::gpu
