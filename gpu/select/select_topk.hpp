// Phase 2 of the select kernel: the canonical top-k of one row's scores.
// Device code, included by select.hip only.
//
// Every block b gets the 64-bit key select_key(score[b], b) (select_codes.hpp):
// unsigned key order is the canonical order, keys are distinct. So the top k
// blocks are exactly the k largest keys, and the k-th largest key is found
// by an MSB-first radix select (8 bits per pass, at most 8 passes, usually
// far fewer: it stops as soon as the whole bucket it is in is selected).
// The k winners (key >= threshold) are gathered into shared memory and
// sorted descending with a bitonic sort, which gives the canonical order.
//
// The block size must be kSelectThreads (256): the histogram scan gives each
// thread one of the 256 digit bins.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/select/select_codes.hpp"

namespace qsa::gpu::select_detail {

inline constexpr int kSelectThreads = 256;
inline constexpr int kRadixBins = 256;
inline constexpr int kMaxWinners = 2048;  // kSelectMaxBlocksBudget

struct TopKShared {
  uint64_t keys[kMaxWinners];  // winners, then sorted
  uint32_t hist[kRadixBins];
  uint32_t scan[kRadixBins];
  uint32_t digit;   // the bucket holding the k-th key in this pass
  uint32_t need;    // how many keys still to take from that bucket
  uint32_t bucket;  // keys in that bucket
  uint32_t count;   // winners gathered
};

// The k-th largest key over b < visible, for 1 <= k < visible. The result has
// zeros below the bits it fixed, so {key >= result} holds exactly k keys.
__device__ inline uint64_t kth_largest_key(const float* scores, int32_t visible, uint32_t k, TopKShared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  uint64_t prefix = 0;
  uint64_t mask = 0;
  uint32_t need = k;  // rank of the wanted key among keys matching prefix
  for (int shift = 56; shift >= 0; shift -= 8) {
    sh.hist[tid] = 0;
    __syncthreads();
    for (int32_t b = tid; b < visible; b += kSelectThreads) {
      const uint64_t key = select_key(scores[b], static_cast<uint32_t>(b));
      if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 0xFFu], 1u);
    }
    __syncthreads();
    // Inclusive suffix sums (Hillis-Steele): scan[d] = keys in buckets >= d.
    const uint32_t here = sh.hist[tid];
    uint32_t incl = here;
    sh.scan[tid] = incl;
    __syncthreads();
    for (int off = 1; off < kRadixBins; off <<= 1) {
      const uint32_t add = tid + off < kRadixBins ? sh.scan[tid + off] : 0u;
      __syncthreads();
      incl += add;
      sh.scan[tid] = incl;
      __syncthreads();
    }
    // Exactly one non-empty bucket has (keys above it) < need <= (keys from it up).
    const uint32_t above = incl - here;
    if (here > 0 && above < need && need <= incl) {
      sh.digit = static_cast<uint32_t>(tid);
      sh.need = need - above;
      sh.bucket = here;
    }
    __syncthreads();
    prefix |= static_cast<uint64_t>(sh.digit) << shift;
    mask |= uint64_t{0xFF} << shift;
    need = sh.need;
    const bool whole_bucket = sh.bucket == need;
    __syncthreads();  // everyone has read sh.* before the next pass rewrites it
    if (whole_bucket) break;
  }
  return prefix;
}

// Descending bitonic sort of keys[0, n), n a power of two <= kMaxWinners.
__device__ inline void bitonic_sort_desc(uint64_t* keys, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < n; i += kSelectThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const uint64_t a = keys[i];
          const uint64_t b = keys[j];
          // (i & size) == 0: this run ends up descending, else ascending; the
          // last pass (size == n) leaves everything descending.
          const bool descending = (i & size) == 0;
          if (descending ? a < b : a > b) {
            keys[i] = b;
            keys[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }
}

__device__ inline int next_pow2(int x) {
  int n = 1;
  while (n < x) n <<= 1;
  return n;
}

// Gathers the k keys >= threshold into sh.keys and sorts them descending;
// sh.keys[k, next_pow2(k)) is zero padding (smaller than every key).
__device__ inline void gather_and_sort(const float* scores, int32_t visible, uint64_t threshold, int k,
                                       TopKShared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) sh.count = 0;
  __syncthreads();
  for (int32_t b = tid; b < visible; b += kSelectThreads) {
    const uint64_t key = select_key(scores[b], static_cast<uint32_t>(b));
    if (key >= threshold) {
      const uint32_t slot = atomicAdd(&sh.count, 1u);
      if (slot < static_cast<uint32_t>(kMaxWinners)) sh.keys[slot] = key;  // never more than k
    }
  }
  const int n = next_pow2(k);
  for (int i = k + tid; i < n; i += kSelectThreads) sh.keys[i] = 0;
  __syncthreads();
  bitonic_sort_desc(sh.keys, n);
}

}  // namespace qsa::gpu::select_detail
