// Counters for barriers between the thread blocks of one launch, without a
// memset launch before each kernel: a per-device ring of kArrivalRing
// counters, zeroed once when first needed and never freed, from which each
// launch takes the next n. A barrier's blocks add a total of 2^31 to their
// counter (sparse_attention_spread.hip's pair_barrier), so it only flips
// the counter's top bit and needs no reset; a counter is shared by two
// launches only if kArrivalRing / n launches that use the ring are in
// flight at once (one decode row at 2 KV groups takes n = 2: 524288).
#pragma once

#include <cstdint>

namespace qsa::gpu {

inline constexpr int64_t kArrivalRing = int64_t{1} << 20;

// n (1..kArrivalRing) consecutive counters on the current device, zeroed
// before their first use.
uint32_t* arrival_counters(int64_t n);

}  // namespace qsa::gpu
