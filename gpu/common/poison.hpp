// Poisoning of device outputs before a kernel runs, so a test can tell an
// element the kernel never wrote from one it wrote wrongly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qsa::gpu {

// Fills n 32-bit words at dst with `pattern` (a NaN bit pattern for floats,
// a sentinel for ids).
void poison_words(uint32_t* dst, size_t n, uint32_t pattern);

inline constexpr uint32_t kPoisonFloat = 0x7fc0dead;  // a quiet NaN with a payload
inline constexpr uint32_t kPoisonId = 0x80000001;     // INT32_MIN + 1, never a valid id

}  // namespace qsa::gpu
