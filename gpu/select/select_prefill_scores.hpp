// Phase 1 of the prefill path: the fp32 block scores of a chunk of
// consecutive query rows. Device code, included by select.hip only.
//
// A thread block owns rows [c0, c1) of the step (shape.rows of them). Each
// maximal run of rows with the same token_to_req is one tile: its decoded
// queries go to shared memory, then the request's compressed keys stream
// through shared memory shape.keys blocks at a time, decoded once and used by
// every (row, block) pair of the run. Thread i of a tile scores pair
// (row i / nk, block i mod nk): the threads of a wave share the row (a
// broadcast read of q) and walk distinct key rows (odd strides, distinct
// banks). Every score comes from score_with, the decode path's formula, so
// the scratch holds the decode path's bits. Blocks past a row's V are not
// written, exactly as in the decode path.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/select/select.hpp"
#include "gpu/select/select_args.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_scores.hpp"

namespace qsa::gpu::select_detail {

// Cache row of block b of the request whose table row is `table_row`, or -1
// when its page is beyond the table, unmapped or past the cache (such a
// block scores NaN, as in paged_row).
__device__ inline int64_t prefill_cache_row(const SelectArgs& a, const int32_t* table_row, int32_t b) {
  const int32_t page = b / a.rows_per_page;
  const int32_t phys = page < a.max_pages ? table_row[page] : -1;
  if (phys < 0 || phys >= a.num_pages) return -1;
  return int64_t{phys} * a.rows_per_page + b % a.rows_per_page;
}

// Scores rows [r0, r0 + n) of request `req` (n <= shape.rows). Every thread of
// the block calls it with the same arguments (the barriers need that).
template <CodeKind kKind, class Code>
__device__ void score_prefill_run(const Code* index_q, const Code* keys, const SelectArgs& a,
                                  const SelectPrefillShape& shape, int64_t r0, int n, int32_t req, float* q_s,
                                  float* k_s, int32_t* vis_s, uint32_t* ok_s) {
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  __syncthreads();  // the previous run has finished reading vis_s, q_s and k_s
  if (tid < n) vis_s[tid] = guarded_visible(a, r0 + tid);
  __syncthreads();
  int32_t max_v = 0;
  for (int r = 0; r < n; ++r) max_v = vis_s[r] > max_v ? vis_s[r] : max_v;
  if (max_v == 0) return;  // uniform: every thread read the same vis_s

  const int qv = a.heads * a.dim;
  for (int i = tid; i < n * qv; i += threads) {
    const int r = i / qv;
    const int e = i - r * qv;
    q_s[r * shape.q_stride + e] = decode_code<kKind>(index_q[(r0 + r) * qv + e]);
  }
  const int32_t* table_row = a.block_table_c + int64_t{req} * a.max_pages;
  for (int32_t b0 = 0; b0 < max_v; b0 += shape.keys) {
    __syncthreads();  // q_s is written; the previous tile's pairs are done with k_s
    const int nk = max_v - b0 < shape.keys ? max_v - b0 : shape.keys;
    for (int i = tid; i < nk * a.dim; i += threads) {
      const int kb = i / a.dim;
      const int j = i - kb * a.dim;
      const int64_t row = prefill_cache_row(a, table_row, b0 + kb);
      if (row >= 0) k_s[kb * shape.k_stride + j] = decode_code<kKind>(keys[row * a.dim + j]);
    }
    if (tid < nk) ok_s[tid] = prefill_cache_row(a, table_row, b0 + tid) >= 0 ? 1u : 0u;
    __syncthreads();
    for (int i = tid; i < n * nk; i += threads) {
      const int r = i / nk;
      const int kb = i - r * nk;
      const int32_t b = b0 + kb;
      if (b >= vis_s[r]) continue;
      const float s = ok_s[kb] != 0u ? score_with(q_s + r * shape.q_stride, DecodedKey{k_s + kb * shape.k_stride},
                                                  a.heads, a.dim, a.scale)
                                     : float_from_bits(kQuietNanBits);
      a.score_scratch[(r0 + r) * a.score_stride + b] = s;
    }
  }
}

// The rows of this thread block's chunk, run by run.
template <CodeKind kKind, class Code>
__device__ void score_prefill_chunk(const Code* index_q, const Code* keys, const SelectArgs& a,
                                    const SelectPrefillShape& shape, float* q_s, float* k_s, int32_t* vis_s,
                                    uint32_t* ok_s) {
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * shape.rows;
  const int64_t c1 = c0 + shape.rows < a.rows ? c0 + shape.rows : a.rows;
  for (int64_t r0 = c0; r0 < c1;) {
    const int32_t req = a.token_to_req[r0];
    int64_t r1 = r0 + 1;
    while (r1 < c1 && a.token_to_req[r1] == req) ++r1;
    if (req >= 0 && req < a.num_requests)
      score_prefill_run<kKind>(index_q, keys, a, shape, r0, static_cast<int>(r1 - r0), req, q_s, k_s, vis_s, ok_s);
    r0 = r1;
  }
}

}  // namespace qsa::gpu::select_detail
