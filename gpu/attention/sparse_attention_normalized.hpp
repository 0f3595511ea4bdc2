// Internal interface between the launcher (sparse_attention.hip) and the
// decode path's kernels for p_rounding = kBf16Normalized
// (sparse_attention_normalized.hip). Include only from .hip files.
//
// transformers' eager attention rounds the NORMALISED probabilities,
// P = bf16(exp(S - m) / l), with m and l the row's global max and sum, so
// both must be known before any PV term: two passes over a split's ids.
//   stats  (splits > 1 only) one block per (row, group, head chunk, split):
//          the decode kernel's fp32 logits and online max/sum over the
//          split's ids -> ws_ml[row, head, split] = (m_s, l_s);
//   PV     the same grid: m = max_s m_s, l = sum_s l_s exp(m_s - m) (the
//          merge kernel's log-sum-exp, in split order, so every split of a
//          head gets the same m and l); with one split the block computes m
//          and l itself in a first pass. Then per tile the logits again
//          (bit-identical: same code, same inputs), P = bf16(expf(S - m) / l)
//          and acc += P V with no rescale; one split stores acc as A, more
//          write acc to ws_acc;
//   sum    (splits > 1) A = sum_s ws_acc[row, head, split] in split order.
// The workspace is the decode path's ([T, H, splits, D] + [T, H, splits, 2]).
#pragma once

#include <cstdint>

#include "gpu/attention/attention_tile.hpp"
#include "gpu/common/device_api.hpp"

namespace qsa::gpu::attn {

// Runs the passes above for `rows` rows; `a` must be complete and checked
// (ws_acc and ws_ml set when a.splits > 1).
void launch_normalized(const KernelArgs& a, int head_dim, int group, int64_t rows, bool fp8, hipStream_t stream);

}  // namespace qsa::gpu::attn
