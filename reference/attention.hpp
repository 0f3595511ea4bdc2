// Sparse GQA attention over the paged main KV cache, and dense causal
// attention for oracles and tests (spec section 7).
//
// Query head h uses KV head g = h div (H / G). For the row of request i at
// position p, the candidate ids are its token-index row (request-relative):
//   S_j = (Q_h · K_g[t_j]) · D^-1/2,  P = softmax(S),  A_h = Σ_j P_j V_g[t_j]
// Entries that are -1, >= L (the request's seq_len), past the count column's
// bound, or on an unmapped page get probability 0; a row with no valid entry
// outputs 0 (and so do padding rows). Reading a mapped slot whose position tag
// is not the id (never written, or overwritten) throws InputError.
//
// Precision knobs: logits rounded to bf16 (hf-eager); P rounded to bf16 either
// unnormalised (exp(s - max), engines) or normalised (hf-eager); A rounded to
// bf16 when the storage-point knob is on. With Octave KV, ids in the first
// `sinks` positions or the last `window` positions of the request (t >= L -
// window) read the exact shadow copies.
#pragma once

#include <cstdint>

#include "reference/core/stage_params.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"
#include "reference/kv_cache.hpp"

namespace qsa {

// q: [T, H, D]; token_idx: [T, p.index_width] -> out: [T, H, D].
void sparse_attention(const AttentionParams& p, const TensorD& q, const TensorI32& token_idx,
                      const StepLayout& layout, const MainKvCache& cache, TensorD& out);

// Every row attends all tokens 0..p of its request. q, out: [T, H, D].
void dense_causal_attention(const AttentionParams& p, const TensorD& q, const StepLayout& layout,
                            const MainKvCache& cache, TensorD& out);

}  // namespace qsa
