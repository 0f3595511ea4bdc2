// The weights of one QSA layer. Matrices are [out, in] as torch's Linear
// stores them; norm weights are zero-centred (Gemma: the gain is 1 + w).
#pragma once

#include <cstdint>

#include "reference/core/config.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

struct LayerWeights {
  TensorD index_qk_proj;  // [(H_I + 1)·d_I, hidden]: H_I query heads, then the raw key
  TensorD index_q_norm;   // [d_I]
  TensorD index_k_norm;   // [d_I]
  TensorD q_proj;         // [H·2D, hidden]: per head [Q (D) | gate (D)]
  TensorD k_proj;         // [G·D, hidden]
  TensorD v_proj;         // [G·D, hidden]
  TensorD q_norm;         // [D]
  TensorD k_norm;         // [D]
  TensorD o_proj;         // [hidden, H·D]
};

// InputError naming the first weight with a wrong shape or a non-finite value.
void validate_weights(const QsaConfig& config, const LayerWeights& w);

// Fresh random bf16-representable weights with the scale of a trained layer
// (std 1/sqrt(fan_in); norm weights around 0). Every tensor has its own RNG
// stream named after it, so adding a tensor never changes the others.
LayerWeights random_weights(const QsaConfig& config, uint64_t seed);

}  // namespace qsa
