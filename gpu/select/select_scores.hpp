// The scoring formula of the select kernels and what its callers share.
// Device code, included by select.hip only (through the decode path's chunk
// scorer, select_decode_scores.hpp, and the prefill path's tiled scorer,
// select_prefill_scores.hpp).
//
//   score(b) = s · Σ_h ReLU(q[h] · k[b])
//
// The summation order is fixed and the same for every block and every path:
// per head one fma chain over j = 0 .. d_I - 1, heads added in increasing h
// (starting from 0.0f), then one product with s. Blocks with bit-identical
// keys therefore get bit-identical scores, which is what makes exact ties
// (and so the lower-id rule) reproducible on the GPU, and what makes the
// paths' scores identical bit for bit.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/select/select_codes.hpp"

namespace qsa::gpu::select_detail {

// Heads accumulated together while one key element is decoded once.
inline constexpr int kHeadGroup = 4;

// q_s[0, n) = decoded q[0, n): the row's H_I · d_I query values.
template <CodeKind kKind, class Code>
__device__ void load_query_row(const Code* q, int n, float* q_s) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))
    q_s[i] = decode_code<kKind>(q[i]);
}

// The one scoring formula of both paths: `key.at(j)` is the block's decoded
// key element j (read from the cache by the decode path, from shared memory
// by the prefill path: the same float either way, so the same bits).
template <class Key>
__device__ float score_with(const float* q_s, const Key& key, int heads, int dim, float scale) {
  float sum = 0.0f;
  for (int h0 = 0; h0 < heads; h0 += kHeadGroup) {
    const int nh = heads - h0 < kHeadGroup ? heads - h0 : kHeadGroup;
    float acc[kHeadGroup] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float* qh = q_s + h0 * dim;
    for (int j = 0; j < dim; ++j) {
      const float kv = key.at(j);
#pragma unroll
      for (int i = 0; i < kHeadGroup; ++i)
        if (i < nh) acc[i] = fmaf(qh[i * dim + j], kv, acc[i]);
    }
#pragma unroll
    for (int i = 0; i < kHeadGroup; ++i)
      if (i < nh) sum += relu_keep_nan(acc[i]);
  }
  return sum * scale;
}

template <CodeKind kKind, class Code>
struct CodedKey {
  const Code* k;
  __device__ float at(int j) const { return decode_code<kKind>(k[j]); }
};

struct DecodedKey {
  const float* k;
  __device__ float at(int j) const { return k[j]; }
};

// Score of the block whose d_I codes start at k.
template <CodeKind kKind, class Code>
__device__ float score_block(const float* q_s, const Code* k, int heads, int dim, float scale) {
  return score_with(q_s, CodedKey<kKind, Code>{k}, heads, dim, scale);
}

// Geometry of the paged compressed cache as one request sees it.
struct PagedKeys {
  const int32_t* table_row;  // block_table_c[req, :]
  int max_pages;
  int64_t num_pages;
  int rows_per_page;
  int dim;
};

// Cache row of block b, or -1 when its page is beyond the table, unmapped or
// past the cache (validate_select rejects such inputs; this is the kernel's
// own cheap guard): such a block reads nothing and scores NaN, so it ranks
// first and cannot go unnoticed.
__device__ inline int64_t paged_row(const PagedKeys& g, int32_t b) {
  const int32_t page = b / g.rows_per_page;
  const int32_t phys = page < g.max_pages ? g.table_row[page] : -1;
  if (phys < 0 || phys >= g.num_pages) return -1;
  return int64_t{phys} * g.rows_per_page + b % g.rows_per_page;
}

}  // namespace qsa::gpu::select_detail
