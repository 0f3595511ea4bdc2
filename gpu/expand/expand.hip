#include "gpu/expand/expand.hpp"

namespace qsa::gpu {

namespace {

constexpr int kExpandThreads = 128;
// Block-table entries of a row's request held in shared memory for the
// slots (pages of later columns are looked up in memory): a lookup per
// column in memory waits for a round trip in every iteration of a thread's
// column loop (expand at one row: 5.0 -> 9.5 us; docs/performance.md,
// twenty-ninth pass).
constexpr int kExpandTablePages = 512;
static_assert(kExpandTablePages % kExpandThreads == 0, "whole entries per thread");

struct ExpandArgs {
  int ratio;
  int blocks_budget;  // K_B
  int width;          // p.width(), count column included
  bool count_column;
  const int32_t* block_ids;
  const int64_t* pos;
  int32_t* token_idx;
};

// One block per row: the threads first agree on the length of the valid
// prefix (the first -1), then write the row's columns. kSlots: each id's
// cache slot too (sl); without it the kernel is the ids-only one, compiled
// apart so that the slots' loads cost it nothing (twenty-ninth pass: a
// kernel for both took 0.3 us more at one row without slots).
template <bool kSlots>
__global__ void __launch_bounds__(kExpandThreads) expand_kernel(ExpandArgs a, ExpandSlots sl) {
  const int64_t t = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  __shared__ int first_free;
  if (tid == 0) first_free = a.blocks_budget;
  __syncthreads();

  const int64_t p = a.pos[t];
  // For the slots: the row's request, its seq_len (a request out of range,
  // as a padding row's -1, attends nothing: seq_len 0) and its first table
  // entries, loaded into registers before the search for the first -1 below
  // so that both round trips overlap.
  constexpr int kEntries = kSlots ? kExpandTablePages / kExpandThreads : 1;
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
      const int i = tid + k * kExpandThreads;
      entry[k] = i < held ? sl.block_table[static_cast<int64_t>(req) * sl.max_pages + i] : -1;
    }
  }

  const int32_t* blocks = a.block_ids + t * a.blocks_budget;
  if (p >= 0) {
    // Each thread finds the first -1 of its strided share; the smallest of
    // those is the row's first -1.
    for (int s = tid; s < a.blocks_budget; s += static_cast<int>(blockDim.x))
      if (blocks[s] == -1) {
        atomicMin(&first_free, s);
        break;
      }
  }
  __shared__ int32_t table_s[kSlots ? kExpandTablePages : 1];
  if constexpr (kSlots) {
#pragma unroll
    for (int k = 0; k < kEntries; ++k)
      if (tid + k * kExpandThreads < held) table_s[tid + k * kExpandThreads] = entry[k];
  }
  __syncthreads();

  const int r = a.ratio;
  const int n_exp = p >= 0 ? first_free * r : 0;
  const int64_t t_start = p >= 0 ? ((p + 1) / r) * r : 0;
  const int n_tail = p >= 0 ? static_cast<int>(p + 1 - t_start) : 0;
  int32_t* out = a.token_idx + t * a.width;
  for (int c = tid; c < a.width; c += static_cast<int>(blockDim.x)) {
    int32_t v = -1;
    if (c < n_exp) {
      v = blocks[c / r] * r + c % r;
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
      const int page = v >= 0 ? v / sl.page_size : -1;
      if (v >= 0 && v < seq_len && page < sl.max_pages) {
        const int32_t phys =
            page < kExpandTablePages ? table_s[page] : sl.block_table[static_cast<int64_t>(req) * sl.max_pages + page];
        if (phys >= 0 && phys < sl.num_pages) slot = phys * sl.page_size + (v - page * sl.page_size);
      }
      if (a.count_column && c == a.width - 1) slot = v;
      sl.token_slots[t * a.width + c] = slot;
    }
  }
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
    if (slots->page_size < 1 || slots->num_pages < 0 || slots->num_pages > 0x7fffffff / slots->page_size)
      throw ConfigError("gpu expand: the slots of " + std::to_string(slots->num_pages) + " pages of " +
                        std::to_string(slots->page_size) + " tokens do not fit int32 (or the page size is below 1)");
    if (slots->num_reqs < 0 || slots->max_pages < 0)
      throw InputError("gpu expand: negative request or page counts for the slots");
    if (slots->token_to_req == nullptr || slots->token_slots == nullptr ||
        (slots->num_reqs > 0 && slots->seq_lens == nullptr) ||
        (slots->num_reqs > 0 && slots->max_pages > 0 && slots->block_table == nullptr))
      throw InputError("gpu expand: a device pointer of the slots is null");
    expand_kernel<true><<<static_cast<unsigned>(num_tokens), kExpandThreads, 0, stream>>>(args, *slots);
  } else {
    expand_kernel<false><<<static_cast<unsigned>(num_tokens), kExpandThreads, 0, stream>>>(args, ExpandSlots{});
  }
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
