// Counters for barriers between the thread blocks of one launch, without a
// memset launch before each kernel and without any setup call, so that a
// kernel's first launch may come inside a stream capture: the kernel keeps
// a ring of kArrivalRing counters in a __device__ array of its own (zero
// when its module loads, on every device), and each launch takes the next
// n of them. A barrier's blocks add a total of 2^31 to their counter
// (sparse_attention_spread.hip's pair_arrive), so it only flips the
// counter's top bit and needs no reset, and the replays of a captured graph
// may reuse one launch's counters. A counter is shared by two launches only
// if kArrivalRing / n launches that use the ring are in flight at once (one
// decode row at 2 KV groups takes n = 2: 32768).
#pragma once

#include <atomic>
#include <cstdint>

namespace qsa::gpu {

inline constexpr int64_t kArrivalRing = int64_t{1} << 16;

// The ring index of the next launch's n (1..kArrivalRing) consecutive
// counters; the caller checks n.
inline int64_t arrival_ring_index(int64_t n) {
  static std::atomic<int64_t> next{0};
  const int64_t i = next.fetch_add(n, std::memory_order_relaxed) % kArrivalRing;
  return i + n <= kArrivalRing ? i : 0;
}

}  // namespace qsa::gpu
