// Scores one query row against dense fp64 attention (docs/accuracy.md).
//
// For the row at position p with query q [H, D] and gate [H, D]:
//   dense logits s_h(t) = q_h · K_g(t) · D^-1/2 over t = 0..p, P_h = softmax;
//   each policy ranks blocks once; a budget K takes its first K / r blocks,
//   expand_row adds the open group's tail (as QSA does), giving the token set S;
//   A_S,h = softmax of s_h restricted to S, applied to V. Attention over S
//   and over 0..p runs one routine over ascending ids, so a set holding every
//   token reproduces dense attention bit for bit.
// Metrics (per head unless noted):
//   mass_recall   Σ_{t in S} P_h(t)
//   topk_recall   |S ∩ the |S| tokens of largest P_h| / |S| (ties to lower ids)
//   block_recall  per row: |blocks ∩ oracle_max's first K_B| / min(V, K_B)
//   attn_err_*    ||A − A_dense(exact KV)|| / ||A_dense(exact KV)|| with A:
//                 sparsity = A_S on exact KV, kv = dense on the dtype's KV,
//                 both = A_S on the dtype's KV
//   out_err_*     per row, the same on Y = o_proj(A ⊙ sigmoid(gate))
#pragma once

#include <cstdint>
#include <vector>

#include "harness/sweep/sweep_kv.hpp"
#include "harness/sweep/sweep_series.hpp"
#include "harness/sweep/sweep_settings.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// What every row of a point shares.
struct RowSetup {
  int heads = 0;                    // H
  int kv_heads = 0;                 // G
  int head_dim = 0;                 // D
  int ratio = 0;                    // r
  double scale = 1;                 // D^-1/2
  const TensorD* o_proj = nullptr;  // [hidden, H·D]
  std::vector<SweepPolicy> policies;
  std::vector<int> budgets;  // ascending, divisible by r
  int window_sinks = 4;
};

struct RowInput {
  int64_t pos = 0;                     // p
  int32_t visible = 0;                 // V(p) at ratio r
  const double* q = nullptr;           // [H, D]
  const double* gate = nullptr;        // [H, D]
  const ContextKv* context = nullptr;  // tokens >= p + 1, with every swept dtype
  const int32_t* block_ids = nullptr;  // the indexer's row: valid prefix, then -1
  int block_width = 0;
  CounterRng random{0, "unset"};  // the random policy's stream for this row
};

RowValues score_row(const RowSetup& setup, const RowInput& row);

}  // namespace qsa
