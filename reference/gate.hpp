// Sigmoid gate (spec section 7): O = A ⊙ sigmoid(gate) elementwise over the
// full head width, A already rounded to the activation dtype. With
// p.round_sigmoid (hf-eager) sigmoid(gate) is rounded to bf16 first; with
// p.round_output the product is rounded to bf16.
#pragma once

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// attn, gate, out: same shape ([T, H, D]).
void apply_gate(const GateParams& p, const TensorD& attn, const TensorD& gate, TensorD& out);

}  // namespace qsa
