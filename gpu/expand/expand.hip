#include "gpu/expand/expand.hpp"

#include <limits>

#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

namespace {

// Threads per row. At up to kWideRows rows, 512: a row's 2049 columns take
// 4 per thread, and 4 warps per scheduler hide each other's latencies (with
// 128 threads a thread's 16 columns were a chain of dependent steps:
// docs/performance.md, thirtieth pass). Above it, 128, so that an SM holds
// 16 rows at once instead of 4 (at 8192 rows 512 threads took 4% longer).
constexpr int kWideThreads = 512;
constexpr int kNarrowThreads = 128;
constexpr int64_t kWideRows = 4096;
// Block ids of a row staged per thread: loaded at once, all in flight,
// before the first -1 is searched, then kept in shared memory (8 x 512 =
// 4096 ids, 8 x 128 = 1024). A longer row takes the unstaged kernel, which
// reads them in its loops.
constexpr int kStagePerThread = 8;
// Block-table entries of a row's request held in shared memory for the
// slots (pages of later columns are looked up in memory): a lookup per
// column in memory waits for a round trip in every iteration of a thread's
// column loop (twenty-ninth pass).
constexpr int kExpandTablePages = 512;
static_assert(kExpandTablePages % kNarrowThreads == 0 && kExpandTablePages % kWideThreads == 0,
              "table entries spread evenly over the threads");

struct ExpandArgs {
  int ratio;
  int blocks_budget;  // K_B
  int width;          // p.width(), count column included
  bool count_column;
  const int32_t* block_ids;
  const int64_t* pos;
  int32_t* token_idx;
};

// v / d for 0 <= v < 2^31 and 1 <= d < 2^31 by a multiplication: m =
// ceil(2^64 / d) (0 for d = 1, which divides by itself), so that v m / 2^64
// = v / d + e with 0 <= e < v / 2^64 < 2^-33 < 1 / d: the floor is exact.
struct PageDivisor {
  uint64_t m;
  int32_t d;
};

PageDivisor page_divisor(int32_t d) {
  return {d > 1 ? std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d) + 1 : 0, d};
}

__device__ inline int32_t page_of(int32_t v, const PageDivisor& pd) {
  return pd.d == 1 ? v : static_cast<int32_t>(__umul64hi(static_cast<uint64_t>(v), pd.m));
}

// One block per row. Every load the row needs is issued before any is used:
// its position, its block ids (kStaged: all of them, into registers, then
// shared memory) and, for the slots, its request; the request's seq_len and
// first table entries follow it. The threads then agree on the length of the
// valid prefix (the first -1) and write the row's columns from shared memory
// alone. kSlots: each id's cache slot too (sl); without it the kernel is the
// ids-only one, compiled apart so that the slots' loads cost it nothing.
template <bool kSlots, bool kStaged, int kThreads>
__global__ void __launch_bounds__(kThreads) expand_kernel(ExpandArgs a, ExpandSlots sl, PageDivisor pd) {
  constexpr int kStageIds = kStagePerThread * kThreads;
  const int64_t t = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  __shared__ int first_free;
  __shared__ int32_t blocks_s[kStaged ? kStageIds : 1];
  __shared__ int32_t table_s[kSlots ? kExpandTablePages : 1];

  const int64_t p = a.pos[t];
  const int32_t* blocks = a.block_ids + t * a.blocks_budget;
  // The row's block ids are memory of the row whatever p is (a padding row
  // carries junk; nothing uses it).
  int32_t staged[kStaged ? kStagePerThread : 1];
  if constexpr (kStaged) {
#pragma unroll
    for (int k = 0; k < kStagePerThread; ++k) {
      const int s = tid + k * kThreads;
      staged[k] = s < a.blocks_budget ? blocks[s] : 0;
    }
  }
  // For the slots: the row's request, its seq_len (a request out of range,
  // as a padding row's -1, attends nothing: seq_len 0) and its first table
  // entries.
  constexpr int kEntries = kSlots ? (kExpandTablePages + kThreads - 1) / kThreads : 1;
  int req = -1, held = 0;
  int64_t seq_len = 0;
  int32_t entry[kEntries];
  if constexpr (kSlots) {
    req = sl.token_to_req[t];
    const bool mapped = req >= 0 && req < sl.num_reqs;
    held = mapped ? min(sl.max_pages, kExpandTablePages) : 0;
    seq_len = mapped ? sl.seq_lens[req] : 0;
#pragma unroll
    for (int k = 0; k < kEntries; ++k) {
      const int i = tid + k * kThreads;
      entry[k] = i < held ? sl.block_table[static_cast<int64_t>(req) * sl.max_pages + i] : -1;
    }
  }
  if (tid == 0) first_free = a.blocks_budget;
  __syncthreads();

  // Each thread finds the first -1 of its strided share; the smallest of
  // those is the row's first -1.
  if constexpr (kStaged) {
#pragma unroll
    for (int k = 0; k < kStagePerThread; ++k) {
      const int s = tid + k * kThreads;
      if (s < a.blocks_budget) blocks_s[s] = staged[k];
    }
    if (p >= 0) {
#pragma unroll
      for (int k = 0; k < kStagePerThread; ++k) {
        const int s = tid + k * kThreads;
        if (s < a.blocks_budget && staged[k] == -1) {
          atomicMin(&first_free, s);
          break;
        }
      }
    }
  } else if (p >= 0) {
    for (int s = tid; s < a.blocks_budget; s += kThreads)
      if (blocks[s] == -1) {
        atomicMin(&first_free, s);
        break;
      }
  }
  if constexpr (kSlots) {
#pragma unroll
    for (int k = 0; k < kEntries; ++k)
      if (tid + k * kThreads < held) table_s[tid + k * kThreads] = entry[k];
  }
  __syncthreads();

  const int r = a.ratio;
  const int n_exp = p >= 0 ? first_free * r : 0;
  const int64_t t_start = p >= 0 ? ((p + 1) / r) * r : 0;
  const int n_tail = p >= 0 ? static_cast<int>(p + 1 - t_start) : 0;
  int32_t* out = a.token_idx + t * a.width;
  // Column c = tid + j kThreads is block c / r = q, offset c % r = o,
  // carried from one column to the next without a division.
  int q = tid / r, o = tid % r;
  const int q_step = kThreads / r, o_step = kThreads % r;
  for (int c = tid; c < a.width; c += kThreads) {
    int32_t v = -1;
    if (c < n_exp) {
      v = (kStaged ? blocks_s[q] : blocks[q]) * r + o;
    } else if (c < n_exp + n_tail) {
      v = static_cast<int32_t>(t_start + (c - n_exp));
    }
    // The count column is never a token id: n_exp + n_tail <= W keeps the
    // two branches above off it.
    if (a.count_column && c == a.width - 1) v = n_exp + n_tail;
    out[c] = v;
    if constexpr (kSlots) {
      // Attention's rules (reference token_slots): ids in [0, seq_len) on a
      // mapped page of the table, within the cache; the count copied.
      int32_t slot = -1;
      const int page = v >= 0 ? page_of(v, pd) : -1;
      if (v >= 0 && v < seq_len && page < sl.max_pages) {
        const int32_t phys =
            page < kExpandTablePages ? table_s[page] : sl.block_table[static_cast<int64_t>(req) * sl.max_pages + page];
        if (phys >= 0 && phys < sl.num_pages) slot = phys * sl.page_size + (v - page * sl.page_size);
      }
      if (a.count_column && c == a.width - 1) slot = v;
      sl.token_slots[t * a.width + c] = slot;
    }
    q += q_step;
    o += o_step;
    if (o >= r) {
      o -= r;
      ++q;
    }
  }
}

template <bool kSlots, int kThreads>
void launch_sized(const ExpandArgs& args, int64_t num_tokens, const ExpandSlots& sl, hipStream_t stream) {
  const PageDivisor pd = page_divisor(kSlots ? sl.page_size : 1);
  const auto grid = static_cast<unsigned>(num_tokens);
  if (args.blocks_budget <= kStagePerThread * kThreads)
    expand_kernel<kSlots, true, kThreads><<<grid, kThreads, 0, stream>>>(args, sl, pd);
  else
    expand_kernel<kSlots, false, kThreads><<<grid, kThreads, 0, stream>>>(args, sl, pd);
}

template <bool kSlots>
void launch_typed(const ExpandArgs& args, int64_t num_tokens, const ExpandSlots& sl, hipStream_t stream) {
  if (num_tokens <= kWideRows)
    launch_sized<kSlots, kWideThreads>(args, num_tokens, sl, stream);
  else
    launch_sized<kSlots, kNarrowThreads>(args, num_tokens, sl, stream);
}

}  // namespace

void launch_expand(const ExpandParams& p, int64_t num_tokens, const int32_t* block_ids, const int64_t* pos,
                   int32_t* token_idx, hipStream_t stream, const ExpandSlots* slots) {
  if (p.ratio < 1 || p.budget < p.ratio || p.budget % p.ratio != 0)
    throw ConfigError("gpu expand: need r >= 1 and a budget K that is a positive multiple of r");
  if (num_tokens < 0 || num_tokens > 0x7fffffff)
    throw InputError("gpu expand: " + std::to_string(num_tokens) + " rows do not fit one launch");
  if (num_tokens == 0) return;
  if (pos == nullptr || token_idx == nullptr || (p.budget / p.ratio > 0 && block_ids == nullptr))
    throw InputError("gpu expand: a device pointer is null");
  const ExpandArgs args{p.ratio, p.budget / p.ratio, p.width(), p.count_column, block_ids, pos, token_idx};
  if (slots != nullptr) {
    if (!slot_ids_fit_int32(slots->num_pages, slots->page_size))
      throw ConfigError("gpu expand: the slots of " + std::to_string(slots->num_pages) + " pages of " +
                        std::to_string(slots->page_size) + " tokens do not fit int32 (or the page size is below 1)");
    if (slots->num_reqs < 0 || slots->max_pages < 0)
      throw InputError("gpu expand: negative request or page counts for the slots");
    if (slots->token_to_req == nullptr || slots->token_slots == nullptr ||
        (slots->num_reqs > 0 && slots->seq_lens == nullptr) ||
        (slots->num_reqs > 0 && slots->max_pages > 0 && slots->block_table == nullptr))
      throw InputError("gpu expand: a device pointer of the slots is null");
    launch_typed<true>(args, num_tokens, *slots, stream);
  } else {
    launch_typed<false>(args, num_tokens, ExpandSlots{}, stream);
  }
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
