// Gemma RMSNorm (spec section 2): y = x * rsqrt(mean(x^2) + eps) * (1 + w),
// weights zero-centred, one rounding (to bf16 when p.round_output) after the
// gain. Applied to indexer Q heads, pooled compressed keys, main Q and K
// heads; never to V or the gate.
#pragma once

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// x, y: p.rows contiguous vectors of p.dim values (any shape with that many
// elements; y is resized to x's shape). w: [dim]. x and y may alias.
void gemma_rms_norm(const RmsNormParams& p, const TensorD& x, const TensorD& w, TensorD& y);

// One vector; the building block the other overload and the pooling use.
void gemma_rms_norm_row(const RmsNormParams& p, const double* x, const double* w, double* y);

}  // namespace qsa
