// Phase 2 of the select kernels: the canonical top-k of one row's scores, by
// one thread block of kThreads threads. Device code, included by select.hip only.
//
// Every block b gets the 64-bit key select_key(score[b], b) (select_codes.hpp):
// unsigned key order is the canonical order and keys are distinct, so the top
// k blocks are exactly the k largest keys. An MSB-first radix select finds
// them with 12-bit digits (5 passes of 12 bits, then 4): the top digit is the
// sign, the exponent and 3 mantissa bits of the score, and scores of one row
// crowd a few exponents, so 8-bit digits would put most keys of a row in one
// or two bins, i.e. the same shared-memory counter. Two measures keep the
// histogram free of that contention:
//  - 4096 bins spread the crowded exponents over their mantissa bits;
//  - a wave counts the bin of its first active lane with one atomicAdd of a
//    ballot's population (the lanes of an exact tie, a NaN run, ReLU zeros
//    or the constant high bits of the ids all land there); only the other
//    lanes add one by one, and they rarely share a bin.
// The scores are read from global memory (L2) in as few passes as possible:
// histogram passes over the row run only until the bucket holding the k-th
// key has at most kMaxCandidates keys (after the first pass for smooth score
// distributions; exact ties can take more); one more pass then gathers the
// keys above that bucket (sure winners) and the bucket itself (candidates,
// in shared memory), and the remaining digits are resolved over the
// candidates alone. Long rows try a sampled threshold first (one pass over
// the row instead of two or three; sampled_top_keys), falling back to the
// passes above when the sample misleads; before that, where the scoring
// kernel counted the row's first digit (select.hip, at most 16 rows), the
// top-k starts from those counts instead of a sample (hist_top_keys). The
// k winners are sorted descending, which gives the canonical order: one key
// per thread in registers when k fits the block (a bitonic sort over
// shuffles and keys[], or in a block alone on its multiprocessor runs
// sorted by shuffles and merged by ranks), else a bitonic sort in shared
// memory.
//
// Every function here runs in the whole block (barriers and ballots), whose
// size must be kThreads.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/common/wave.hpp"
#include "gpu/select/select_codes.hpp"

namespace qsa::gpu::select_detail {

// Threads of a top-k block: kThreads, 512 or 1024, is a template argument of
// everything below (select.hip picks it per launch).
inline constexpr int kTopKMaxThreads = 1024;
inline constexpr int kRadixBits = 12;
inline constexpr int kRadixBins = 1 << kRadixBits;
inline constexpr int kRadixPasses = 6;                            // 5 x 12 bits, then 4
inline constexpr int kMaxWinners = 2048;                          // kSelectMaxBlocksBudget
inline constexpr int kMaxCandidates = 1536;                       // what fits beside the rest in 48 KiB
inline constexpr int kRowBatch = 8;  // scores a thread loads at once (twice that in flight, see RowKeys)
inline constexpr int kMaxWaves = kTopKMaxThreads / kMinWaveSize;
template <int kThreads>
inline constexpr int kBinsPerThread = kRadixBins / kThreads;  // each thread scans its own bins

// The block's shared memory; static, so it must stay within the 48 KiB every
// backend grants without opting in (the fused decode kernel also keeps its
// query row in `hist` before phase 2).
struct TopKShared {
  uint64_t keys[kMaxWinners];    // winners, then sorted
  uint64_t cand[kMaxCandidates]; // the bucket of the k-th key
  alignas(16) uint32_t hist[kRadixBins];
  uint32_t wave_total[kMaxWaves];
  uint32_t digit;       // the bin holding the k-th key in this pass
  uint32_t need;        // its rank among the keys of that bin
  uint32_t bucket;      // keys in that bin
  uint32_t count;       // winners gathered
  uint32_t cand_count;  // candidates gathered
};
static_assert(sizeof(TopKShared) <= 48 * 1024, "static shared memory beyond the default limit");
static_assert(kRadixBits * (kRadixPasses - 1) < 64 && kRadixBits * kRadixPasses >= 64, "the passes cover the key");

// Bits [shift, shift + bits) of the key are the digit of pass `pass`.
__device__ inline int pass_shift(int pass) { return pass < kRadixPasses - 1 ? 64 - kRadixBits * (pass + 1) : 0; }
__device__ inline int pass_bits(int pass) {
  return pass < kRadixPasses - 1 ? kRadixBits : 64 - kRadixBits * (kRadixPasses - 1);
}

// Where the k-th largest key stands after the passes so far; every thread
// holds the same copy.
struct RadixState {
  uint64_t prefix = 0;  // its digits fixed so far, zeros below
  uint64_t mask = 0;    // the bits fixed so far
  uint32_t need = 0;    // its rank among the keys matching prefix
  uint32_t bucket = 0;  // keys matching prefix
  int pass = 0;
  // Before pass 0: the need-th largest of `bucket` keys.
  __device__ static RadixState start(uint32_t need, uint32_t bucket) {
    RadixState st;
    st.need = need;
    st.bucket = bucket;
    return st;
  }
};

// The keys of a row b < visible, read from the scratch row. visit(key,
// valid) runs in a loop with the same trip count in every thread, so it may
// use ballots. The scores come from L2: each thread loads its next kRowBatch
// scores before it visits the current ones, so a pass waits for one L2
// round trip, not one per batch.
template <int kThreads>
struct RowKeys {
  const float* scores;
  uint32_t visible;
  __device__ void load(uint32_t base, float (&s)[kRowBatch]) const {
    const float* p = scores + base + threadIdx.x;  // the batch's addresses are immediate offsets from p
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u) s[u] = base + u * kThreads + threadIdx.x < visible ? p[u * kThreads] : 0.0f;
  }
  // fn(s, base) for every batch: s[u] is the score of block base + u ·
  // kThreads + threadIdx.x (0 past the row).
  template <class Batch>
  __device__ void visit_batches(Batch&& fn) const {
    constexpr uint32_t kStep = kThreads * kRowBatch;
    float s[kRowBatch];
    load(0, s);
    for (uint32_t base = 0; base < visible; base += kStep) {
      float next[kRowBatch];
      load(base + kStep, next);  // past the row: no loads, zeros
      fn(s, base);
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) s[u] = next[u];
    }
  }
  template <class Visit>
  __device__ void visit(Visit&& fn) const {
    visit_batches([&](const float (&s)[kRowBatch], uint32_t base) {
#pragma unroll
      for (int u = 0; u < kRowBatch; ++u) {
        const uint32_t b = base + u * kThreads + threadIdx.x;
        fn(select_key(s[u], b), b < visible);
      }
    });
  }
};

// The candidates in shared memory, visited like RowKeys.
template <int kThreads>
struct CandidateKeys {
  const uint64_t* cand;
  uint32_t count;
  template <class Visit>
  __device__ void visit(Visit&& fn) const {
    for (uint32_t base = 0; base < count; base += kThreads) {
      const uint32_t i = base + threadIdx.x;
      fn(i < count ? cand[i] : uint64_t{0}, i < count);
    }
  }
};

// hist[bin] += 1 for every lane with `active`; the lanes sharing the first
// active lane's bin add with one atomic (see the file comment).
__device__ inline void count_in_bin(uint32_t* hist, bool active, uint32_t bin) {
  const LaneMask act = wave_ballot(active);
  if (act == 0) return;  // uniform over the wave
  const int leader = first_lane(act);
  const uint32_t lead_bin = wave_read_lane(bin, leader);
  const LaneMask same = wave_ballot(active && bin == lead_bin);
  if (lane_id() == leader) {
    atomicAdd(&hist[lead_bin], static_cast<uint32_t>(lane_count(same)));
  } else if (active && bin != lead_bin) {
    atomicAdd(&hist[bin], 1u);
  }
}

// Appends the keys of the lanes with `take` to buf[*count, ...), one atomic
// per wave; slots past `capacity` are dropped (the callers never reach them).
__device__ inline void append_keys(uint64_t* buf, uint32_t* count, uint32_t capacity, bool take, uint64_t key) {
  const LaneMask takers = wave_ballot(take);
  if (takers == 0) return;  // uniform over the wave
  const int leader = first_lane(takers);
  uint32_t base = 0;
  if (lane_id() == leader) base = atomicAdd(count, static_cast<uint32_t>(lane_count(takers)));
  base = wave_read_lane(base, leader);
  const uint32_t slot = base + static_cast<uint32_t>(lane_count(takers & lanes_below()));
  if (take && slot < capacity) buf[slot] = key;
}

// The histogram's bins start at zero: the first pass of each selection
// needs this (hist held other data before: the last selection's bins, or
// the fused decode kernel's query row); pick_bin zeroes them after that.
template <int kThreads>
__device__ inline void zero_hist(TopKShared& sh) {
  uint32_t* mine = sh.hist + threadIdx.x * kBinsPerThread<kThreads>;
#pragma unroll
  for (int i = 0; i < kBinsPerThread<kThreads>; ++i) mine[i] = 0;
  __syncthreads();
}

// From the histogram of a pass, each thread holding its kBinsPerThread
// consecutive bins in `bins`: the bin holding the k-th key, folded into st;
// returns the keys the histogram counts (in every thread). An inclusive
// suffix sum of the threads' totals, within the wave by shuffles and then
// over the waves' totals by shuffles in every wave (a loop over the waves
// above was up to 31 dependent shared-memory loads), tells the one thread
// whose bins hold it. When no thread does (st.need beyond the count, which
// only a histogram from outside the block can give), st takes whatever
// sh.digit / need / bucket held: the callers check the count first, or the
// result after.
template <int kThreads>
__device__ inline uint32_t pick_bin_of(const uint32_t (&bins)[kBinsPerThread<kThreads>], TopKShared& sh,
                                       RadixState& st, int shift, uint32_t digit_mask) {
  const int tid = static_cast<int>(threadIdx.x);
  uint32_t own = 0;
#pragma unroll
  for (int i = 0; i < kBinsPerThread<kThreads>; ++i) own += bins[i];
  const int lane = lane_id();
  const int wave = wave_id();
  uint32_t incl = wave_suffix_sum(own, lane);  // keys in the bins of this thread and the threads above it in the wave
  if (lane == 0) sh.wave_total[wave] = incl;
  __syncthreads();
  // Lane w takes wave w's total; the same suffix sum over lanes, read at
  // lane wave + 1, is the keys of the waves above this one (at lane 0: all).
  const uint32_t waves_incl = wave_suffix_sum(lane < waves_per_block() ? sh.wave_total[lane] : 0u, lane);
  const uint32_t waves_above = wave_read_lane(waves_incl, wave + 1 < warpSize ? wave + 1 : wave);
  const uint32_t total = wave_read_lane(waves_incl, 0);
  if (wave + 1 < warpSize) incl += waves_above;  // else this is the last of warpSize waves: none above
  const uint32_t above = incl - own;
  if (above < st.need && st.need <= incl) {  // exactly one thread
    uint32_t acc = above;
    for (int i = kBinsPerThread<kThreads> - 1; i >= 0; --i) {
      const uint32_t c = bins[i];
      if (acc + c >= st.need) {
        sh.digit = static_cast<uint32_t>(tid * kBinsPerThread<kThreads> + i);
        sh.need = st.need - acc;
        sh.bucket = c;
        break;
      }
      acc += c;
    }
  }
  __syncthreads();
  st.prefix |= static_cast<uint64_t>(sh.digit) << shift;
  st.mask |= static_cast<uint64_t>(digit_mask) << shift;
  st.need = sh.need;
  st.bucket = sh.bucket;
  ++st.pass;
  // sh.digit / need / bucket are rewritten only after the next pass's
  // barrier, sh.wave_total after it too: no barrier needed here.
  return total;
}

// pick_bin_of over the block's histogram in sh.hist. Each thread takes its
// bins into registers and zeroes them for the next pass (no other thread
// reads them, and pick_bin_of's barriers order the zeroes before the next
// pass's counts).
template <int kThreads>
__device__ inline void pick_bin(TopKShared& sh, RadixState& st, int shift, uint32_t digit_mask) {
  uint32_t* mine = sh.hist + threadIdx.x * kBinsPerThread<kThreads>;
  uint32_t bins[kBinsPerThread<kThreads>];
#pragma unroll
  for (int i = 0; i < kBinsPerThread<kThreads>; ++i) {
    bins[i] = mine[i];
    mine[i] = 0;
  }
  pick_bin_of<kThreads>(bins, sh, st, shift, digit_mask);
}

// One radix pass over the keys of `src` that match st.prefix (the
// histogram zeroed: zero_hist before a selection's first pass, pick_bin
// after each).
template <int kThreads, class Keys>
__device__ void radix_pass(const Keys& src, TopKShared& sh, RadixState& st) {
  const int shift = pass_shift(st.pass);
  const uint32_t digit_mask = (1u << pass_bits(st.pass)) - 1u;
  const uint64_t prefix = st.prefix;
  const uint64_t mask = st.mask;
  src.visit([&](uint64_t key, bool valid) {
    count_in_bin(sh.hist, valid && (key & mask) == prefix, static_cast<uint32_t>(key >> shift) & digit_mask);
  });
  __syncthreads();
  pick_bin<kThreads>(sh, st, shift, digit_mask);
}

// Descending bitonic sort of keys[0, n), n a power of two <= kMaxWinners.
template <int kThreads>
__device__ inline void bitonic_sort_desc(uint64_t* keys, int n) {
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) {
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

// The same sort for n <= kThreads, one key per thread in a register:
// partners less than a wave apart swap through shuffles and only the
// farther ones through keys[] behind barriers (10 of the 45 stages at n =
// 512). The shared-memory sort above spent a quarter of the top-k kernel's
// instructions and most of its barriers there (ncu). Threads at or past n
// sort zeros among themselves (n is a power of two, so their partners are
// past n too).
__device__ inline void bitonic_sort_desc_small(uint64_t* keys, int n) {
  const int i = static_cast<int>(threadIdx.x);
  uint64_t key = i < n ? keys[i] : 0;
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      uint64_t other;
      if (stride < warpSize) {  // uniform
        other = wave_shfl_xor(key, stride);
      } else {
        __syncthreads();  // keys[] of the previous stage has been read
        keys[i] = key;
        __syncthreads();
        other = keys[i ^ stride];
      }
      // The lower index of a pair keeps the larger key in a descending run.
      const bool keep_max = ((i & stride) == 0) == ((i & size) == 0);
      key = keep_max == (key > other) ? key : other;
    }
  }
  __syncthreads();  // every read of keys[] is done
  if (i < n) keys[i] = key;
  __syncthreads();
}

// The same sort for n <= kThreads with fewer barriers and more
// instructions, for a block alone on its multiprocessor (1024 threads),
// whose sort waits on latency: one key per thread in a register, in two
// steps with three barriers in all (the register bitonic sort above takes
// 20 barriers at n = 512; docs/performance.md, thirteenth pass):
//  1. runs of kSortRun keys are sorted descending by a bitonic network over
//     shuffles (partners less than kSortRun apart: within a 32-lane group
//     of any wave width);
//  2. each key's place in the whole is its place in its run plus, for every
//     other run, the keys there that go before it: found by a binary search
//     of that run in keys[]. Of equal keys (the zero padding) the one in
//     the earlier run goes first, so the places are a permutation of [0, n).
// Threads at or past n hold zeros (n is a power of two, so they fill whole
// runs past n, or the tail of the only run) and place nothing.
inline constexpr int kSortRun = 32;

// Keys of the descending run s[0, kSortRun) that go before x: greater, or
// also equal when or_equal. Binary search, kSortRun's log2 + 1 loads.
__device__ inline uint32_t run_keys_before(const uint64_t* s, uint64_t x, bool or_equal) {
  uint32_t c = 0;
#pragma unroll
  for (uint32_t step = kSortRun / 2; step > 0; step >>= 1) {
    const uint64_t y = s[c + step - 1];
    c += (y > x || (or_equal && y == x)) ? step : 0u;
  }
  const uint64_t y = s[c];  // c <= kSortRun - 1; the answer is c or c + 1
  return c + ((y > x || (or_equal && y == x)) ? 1u : 0u);
}

__device__ inline void run_rank_sort_desc(uint64_t* keys, int n) {
  const int i = static_cast<int>(threadIdx.x);
  uint64_t key = i < n ? keys[i] : 0;
  const int run = n < kSortRun ? n : kSortRun;
  for (int size = 2; size <= run; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const uint64_t other = wave_shfl_xor(key, stride);
      // The lower index of a pair keeps the larger key in a descending run;
      // the last merge (size == run) leaves every run descending.
      const bool descending = size == run || (i & size) == 0;
      const bool keep_max = ((i & stride) == 0) == descending;
      key = keep_max == (key > other) ? key : other;
    }
  }
  if (n <= kSortRun) {  // one run: sorted (threads past n sorted zeros behind it)
    __syncthreads();    // every read of keys[] is done
    if (i < n) keys[i] = key;
    __syncthreads();
    return;
  }
  // Thread i's key is at place i % kSortRun of run i / kSortRun; the read
  // of keys[i] above was this thread's own, so no barrier before the write.
  if (i < n) keys[i] = key;
  __syncthreads();
  uint32_t place = static_cast<uint32_t>(i % kSortRun);
  if (i < n) {
    const int mine = i / kSortRun;
    const int runs = n / kSortRun;
#pragma unroll 4
    for (int r = 0; r < runs; ++r) {
      const uint32_t before = run_keys_before(keys + r * kSortRun, key, r < mine);
      place += r == mine ? 0u : before;
    }
  }
  __syncthreads();  // every search of keys[] is done
  if (i < n) keys[place] = key;
  __syncthreads();
}

__device__ inline int next_pow2(int x) {
  int n = 1;
  while (n < x) n <<= 1;
  return n;
}

// The k largest keys of scores[0, visible) by radix passes over the whole
// row (1 <= k <= visible, k <= kMaxWinners), unsorted, into sh.keys[0, k).
template <int kThreads>
__device__ inline void radix_top_keys(const float* scores, int32_t visible, int k, TopKShared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  const RowKeys<kThreads> row{scores, static_cast<uint32_t>(visible)};
  RadixState st = RadixState::start(static_cast<uint32_t>(k), static_cast<uint32_t>(visible));
  zero_hist<kThreads>(sh);
  // Histogram passes over the row until the k-th key's bucket fits the
  // candidate buffer, or is taken whole (bucket == need; at the latest once
  // all 64 bits are fixed, as keys are distinct).
  while (st.bucket != st.need && st.bucket > static_cast<uint32_t>(kMaxCandidates) && st.pass < kRadixPasses)
    radix_pass<kThreads>(row, sh, st);

  // Gather: keys above the bucket are winners; the bucket is either all
  // winners or the candidates.
  const bool whole = st.bucket == st.need;
  if (tid == 0) {
    sh.count = 0;
    sh.cand_count = 0;
  }
  __syncthreads();
  {
    const uint64_t prefix = st.prefix;
    const uint64_t mask = st.mask;
    row.visit([&](uint64_t key, bool valid) {
      const uint64_t m = key & mask;
      append_keys(sh.keys, &sh.count, kMaxWinners, valid && (m > prefix || (whole && m == prefix)), key);
      if (!whole) append_keys(sh.cand, &sh.cand_count, kMaxCandidates, valid && m == prefix, key);
    });
  }
  __syncthreads();

  if (!whole) {  // the remaining digits over the candidates, in shared memory
    const CandidateKeys<kThreads> cands{sh.cand, st.bucket};
    while (st.bucket != st.need && st.pass < kRadixPasses) radix_pass<kThreads>(cands, sh, st);
    const uint64_t threshold = st.prefix;  // the candidates >= it are exactly the ones still needed
    cands.visit([&](uint64_t key, bool valid) {
      append_keys(sh.keys, &sh.count, kMaxWinners, valid && key >= threshold, key);
    });
    __syncthreads();
  }
}

// The smallest of the `rank` largest keys of src (1 <= rank <= its count),
// by radix passes in shared memory: exactly `rank` keys of src are >= it.
template <int kThreads, class Keys>
__device__ uint64_t rank_threshold(const Keys& src, uint32_t count, uint32_t rank, TopKShared& sh) {
  RadixState st = RadixState::start(rank, count);
  zero_hist<kThreads>(sh);
  while (st.bucket != st.need && st.pass < kRadixPasses) radix_pass<kThreads>(src, sh, st);
  return st.prefix;
}

// The sampled path for long rows. The radix passes over a whole row cost a
// block ~11K instructions per warp at 32K blocks (ncu: 50 us for 64 rows,
// one block per row; 27.5 us with this path, the batched gather and the
// register sort). Instead: the r-th largest of kTopKSample evenly spaced
// keys is a threshold T, with r four standard deviations above the sample's
// expected count of row winners, so that T lies below the row's k-th key;
// one pass gathers the row's keys >= T (about r · visible / kTopKSample)
// into sh.keys, and the k winners are picked among them in shared memory.
// The result is exact whatever the scores: when the gathered keys are fewer
// than k or overflow sh.keys, it returns false and the caller runs the full
// radix select. On success sh.keys[0, k) holds the k largest keys, unsorted.
inline constexpr int kTopKSample = 1024;

// r: the sample's expected count of row winners, k · kTopKSample / visible
// rounded up, plus four standard deviations and 4.
__device__ inline uint32_t sample_rank(int32_t visible, int k) {
  // 32-bit: k <= kMaxWinners, so k · kTopKSample + visible < 2^32 (a 64-bit
  // division is a call to a slow routine).
  const uint32_t v = static_cast<uint32_t>(visible);
  const uint32_t expect = (static_cast<uint32_t>(k) * kTopKSample + v - 1) / v;
  return expect + 4 * static_cast<uint32_t>(sqrtf(static_cast<float>(expect))) + 4;
}

// Rows long enough for a sample stride of 8 or more, k within sh.cand, and
// the gathered keys expected well inside sh.keys.
__device__ inline bool sampled_top_keys_apply(int32_t visible, int k) {
  if (k > kMaxCandidates || visible < 8 * kTopKSample) return false;
  return int64_t{sample_rank(visible, k)} * (visible / kTopKSample) <= kMaxWinners * 3 / 4;
}

// Appends the row's keys whose scores' orderable bits are >= t_hi to sh.keys
// (from sh.count on, capped at kMaxWinners): the keys >= t_hi << 32, which
// is all a sampled threshold needs. About 1,150 of 32K keys pass at the
// model's shape, which still puts one in most waves' batches; the general
// visit, a ballot and an atomic per key, was half of the top-k kernel's
// instructions (ncu). Here a wave's whole batch takes one ballot per score
// slot and one atomic, and each score one float compare (ScoreAtLeast):
// the orderable bits' eight instructions per score (NaN, zero and sign
// cases) made the gather bound by its instructions (docs/performance.md,
// thirteenth pass). The keys it gathers are all the keys above some score,
// which is what the caller's checks need.
template <int kThreads>
__device__ inline void gather_at_least(const RowKeys<kThreads>& row, uint32_t t_hi, TopKShared& sh) {
  // Once per thread: lane_id() divides by warpSize, which nvcc does not
  // know to be 32 (ncu found the division in every batch).
  const int lane = lane_id();
  const LaneMask below = lanes_below();
  const ScoreAtLeast at_least(t_hi);
  row.visit_batches([&](const float (&s)[kRowBatch], uint32_t base) {
    LaneMask taken[kRowBatch];
    uint32_t total = 0;
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u) {
      const uint32_t b = base + u * kThreads + threadIdx.x;
      taken[u] = wave_ballot((b < row.visible) & at_least(s[u]));
      total += static_cast<uint32_t>(lane_count(taken[u]));
    }
    if (total == 0) return;  // uniform over the wave
    uint32_t at = 0;
    if (lane == 0) at = atomicAdd(&sh.count, total);
    at = wave_read_lane(at, 0);
#pragma unroll
    for (int u = 0; u < kRowBatch; ++u) {
      const uint32_t b = base + u * kThreads + threadIdx.x;
      const uint32_t slot = at + static_cast<uint32_t>(lane_count(taken[u] & below));
      if (((taken[u] >> lane) & 1) != 0 && slot < kMaxWinners) sh.keys[slot] = select_key(s[u], b);
      at += static_cast<uint32_t>(lane_count(taken[u]));
    }
  });
}

// Appends the keys of `gathered` >= kth to sh.cand (capped at
// kMaxCandidates) and returns how many there are.
template <int kThreads>
__device__ inline uint32_t pick_at_least(const CandidateKeys<kThreads>& gathered, uint64_t kth, TopKShared& sh) {
  if (threadIdx.x == 0) sh.cand_count = 0;
  __syncthreads();
  gathered.visit([&](uint64_t key, bool valid) {
    append_keys(sh.cand, &sh.cand_count, kMaxCandidates, valid && key >= kth, key);
  });
  __syncthreads();
  const uint32_t picked = sh.cand_count;
  __syncthreads();  // read by every thread before a second pick may reset it
  return picked;
}

// The end of the sampled and the histogram paths: sh.keys[0, n) holds every
// key of the row at or above some key, k <= n <= kMaxWinners and k <=
// kMaxCandidates; the k largest of them (the row's k largest) go to
// sh.keys[0, k). st is where the radix passes over them start: pass 0
// (need k, bucket n), or the state a histogram of the whole row gave after
// its pass (the k-th key's top digit known, so the passes start at the
// next). That histogram came from another kernel, so the result is checked:
// exactly k keys must be >= the threshold it leads to, else the passes run
// again from pass 0.
template <int kThreads>
__device__ inline void keep_top_gathered(uint32_t n, int k, RadixState st, TopKShared& sh) {
  const CandidateKeys<kThreads> gathered{sh.keys, n};
  zero_hist<kThreads>(sh);
  while (st.bucket != st.need && st.pass < kRadixPasses) radix_pass<kThreads>(gathered, sh, st);
  if (pick_at_least<kThreads>(gathered, st.prefix, sh) != static_cast<uint32_t>(k))  // uniform
    pick_at_least<kThreads>(gathered, rank_threshold<kThreads>(gathered, n, static_cast<uint32_t>(k), sh), sh);
  for (int i = static_cast<int>(threadIdx.x); i < k; i += kThreads) sh.keys[i] = sh.cand[i];
  __syncthreads();
}

template <int kThreads>
__device__ inline bool sampled_top_keys(const float* scores, int32_t visible, int k, TopKShared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  const uint32_t stride = static_cast<uint32_t>(visible) / kTopKSample;
  for (int i = tid; i < kTopKSample; i += kThreads) {
    const uint32_t b = static_cast<uint32_t>(i) * stride;
    sh.cand[i] = select_key(scores[b], b);
  }
  if (tid == 0) sh.count = 0;
  __syncthreads();
  // The gather keeps the sample threshold's score and drops its id: a lower
  // threshold (ties of that score join), which the checks below allow.
  const CandidateKeys<kThreads> sample{sh.cand, kTopKSample};
  const uint64_t t = rank_threshold<kThreads>(sample, kTopKSample, sample_rank(visible, k), sh);
  gather_at_least<kThreads>(RowKeys<kThreads>{scores, static_cast<uint32_t>(visible)}, static_cast<uint32_t>(t >> 32),
                            sh);
  __syncthreads();
  const uint32_t n = sh.count;
  if (n < static_cast<uint32_t>(k) || n > static_cast<uint32_t>(kMaxWinners)) return false;  // uniform
  keep_top_gathered<kThreads>(n, k, RadixState::start(static_cast<uint32_t>(k), n), sh);
  return true;
}

// The histogram path (select.hip's split decode path on NVIDIA): the scoring
// kernel counted every score of the row by its top 12 key bits into a
// global histogram, which the top-k block holds, kBinsPerThread bins per
// thread, in `bins`. That replaces the sampled path's sample and its two
// radix passes (~11K of the top-k's ~41K cycles at 64 rows x 128K,
// thirteenth pass) with one pick over the bins: the k-th key's top digit d.
// One gather takes the row's keys whose digit is >= d, exactly k - need +
// bucket of them, and the passes over those start at the second digit.
// Nothing is trusted: the bins must add up to `visible`, the gather must
// find the count they predict and fit sh.keys, and keep_top_gathered checks
// its threshold; else this returns false (before the gather: no pass over
// the row wasted) and the caller runs the sampled or the full radix path.
template <int kThreads>
__device__ inline bool hist_top_keys(const float* scores, int32_t visible, int k,
                                     const uint32_t (&bins)[kBinsPerThread<kThreads>], TopKShared& sh) {
  if (k > kMaxCandidates) return false;  // uniform: keep_top_gathered picks through sh.cand
  if (threadIdx.x == 0) sh.count = 0;    // ordered before the gather by pick_bin_of's barriers
  RadixState st = RadixState::start(static_cast<uint32_t>(k), static_cast<uint32_t>(visible));
  const uint32_t total = pick_bin_of<kThreads>(bins, sh, st, pass_shift(0), (1u << pass_bits(0)) - 1u);
  if (total != static_cast<uint32_t>(visible)) return false;  // uniform
  const uint32_t expected = static_cast<uint32_t>(k) - st.need + st.bucket;
  if (expected > static_cast<uint32_t>(kMaxWinners)) return false;  // the bin is too crowded
  const uint32_t digit = static_cast<uint32_t>(st.prefix >> pass_shift(0));
  gather_at_least<kThreads>(RowKeys<kThreads>{scores, static_cast<uint32_t>(visible)}, bin_floor_code(digit), sh);
  __syncthreads();
  const uint32_t n = sh.count;
  if (n < static_cast<uint32_t>(k) || n > static_cast<uint32_t>(kMaxWinners)) return false;  // uniform
  if (n != expected) st = RadixState::start(static_cast<uint32_t>(k), n);  // not this row's histogram: afresh
  keep_top_gathered<kThreads>(n, k, st, sh);
  return true;
}

// The k largest keys of scores[0, visible) (1 <= k <= visible, k <=
// kMaxWinners), sorted descending into sh.keys[0, k); sh.keys[k,
// next_pow2(k)) is zero padding (smaller than every key).
// `bins`: the row's histogram from the scoring kernel when `hist` (see
// hist_top_keys), else unused.
template <int kThreads>
__device__ inline void select_top_keys(const float* scores, int32_t visible, int k, TopKShared& sh, bool hist,
                                       const uint32_t (&bins)[kBinsPerThread<kThreads>]) {
  const int tid = static_cast<int>(threadIdx.x);
  if (!(hist && hist_top_keys<kThreads>(scores, visible, k, bins, sh)) &&
      !(sampled_top_keys_apply(visible, k) && sampled_top_keys<kThreads>(scores, visible, k, sh)))
    radix_top_keys<kThreads>(scores, visible, k, sh);
  const int n = next_pow2(k);
  for (int i = k + tid; i < n; i += kThreads) sh.keys[i] = 0;
  __syncthreads();
  if (n <= kThreads) {
    // 512-thread blocks share a multiprocessor (the prefill grid, many
    // decode rows), where the rank sort's extra instructions cost more than
    // its barriers save (prefill select +3%).
    if constexpr (kThreads == kTopKMaxThreads) {
      run_rank_sort_desc(sh.keys, n);
    } else {
      bitonic_sort_desc_small(sh.keys, n);
    }
  } else {
    bitonic_sort_desc<kThreads>(sh.keys, n);
  }
}

}  // namespace qsa::gpu::select_detail
