// Per-stage values of one step, as a producer recorded them. The step driver
// can take one as a feed: in isolated replay, each recorded value replaces
// the driver's own before later stages use it, so a wrong stage is
// pinpointed instead of smearing into everything after it. An empty tensor
// means "not recorded". Shapes as in StepOutputs (step_driver.hpp).
#pragma once

#include "reference/core/tensor.hpp"

namespace qsa {

struct StageRecord {
  TensorD index_q;        // [T, H_I, d_I]
  TensorD raw_keys;       // [T, d_I]
  TensorI32 comp_tokens;  // [n] rows that completed a group
  TensorI64 comp_blocks;  // [n]
  TensorI64 comp_slots;   // [n]
  TensorD comp_keys;      // [n, d_I]
  TensorI32 block_ids;    // [T, K_B]
  TensorD block_scores;   // [T, K_B]
  TensorI32 token_idx;    // [T, W] or [T, W + 1]
  TensorD q;              // [T, H, D]
  TensorD k;              // [T, G, D]
  TensorD v;              // [T, G, D]
  TensorD gate;           // [T, H, D]
  TensorD attn;           // [T, H, D]
  TensorD gated;          // [T, H, D]
  TensorD out;            // [T, hidden]
};

}  // namespace qsa
