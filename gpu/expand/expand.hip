#include "gpu/expand/expand.hpp"

namespace qsa::gpu {

namespace {

constexpr int kExpandThreads = 128;

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
// prefix (the first -1), then write the row's columns.
__global__ void __launch_bounds__(kExpandThreads) expand_kernel(ExpandArgs a) {
  const int64_t t = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  __shared__ int first_free;
  if (tid == 0) first_free = a.blocks_budget;
  __syncthreads();

  const int64_t p = a.pos[t];
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
  }
}

}  // namespace

void launch_expand(const ExpandParams& p, int64_t num_tokens, const int32_t* block_ids, const int64_t* pos,
                   int32_t* token_idx, hipStream_t stream) {
  if (p.ratio < 1 || p.budget < p.ratio || p.budget % p.ratio != 0)
    throw ConfigError("gpu expand: need r >= 1 and a budget K that is a positive multiple of r");
  if (num_tokens < 0 || num_tokens > 0x7fffffff)
    throw InputError("gpu expand: " + std::to_string(num_tokens) + " rows do not fit one launch");
  if (num_tokens == 0) return;
  if (pos == nullptr || token_idx == nullptr || (p.budget / p.ratio > 0 && block_ids == nullptr))
    throw InputError("gpu expand: a device pointer is null");
  const ExpandArgs args{p.ratio, p.budget / p.ratio, p.width(), p.count_column, block_ids, pos, token_idx};
  expand_kernel<<<static_cast<unsigned>(num_tokens), kExpandThreads, 0, stream>>>(args);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
