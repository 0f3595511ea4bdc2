// NeoX partial RoPE and interleaved mRoPE (spec section 3).
//
// NeoX pairs dim j with j + R/2 for j < R/2:
//   out[j] = x[j] cos - x[j+R/2] sin,  out[j+R/2] = x[j+R/2] cos + x[j] sin
// GPT-J (an option the model does not use) pairs 2j with 2j+1.
// Dims from R on pass through untouched.
//
// Frequency pair j takes its position from axis (t, h, w) by the interleaved
// mRoPE map: h when j % 3 == 1 and j < 3·section[1]; w when j % 3 == 2 and
// j < 3·section[2]; t otherwise. Text input has three equal rows, which is
// plain RoPE.
//
// Angle precision (p.angle): exact fp64, or the torch engines' fp32
// inv_freq = f32(1 / f32(theta^(2j/R))) and angle = f32(f32(pos) * inv_freq),
// optionally with inv_freq rounded to bf16. cos/sin are then kept exact,
// rounded to fp32, or to bf16 (after fp32, as a cos/sin cache is built).
#pragma once

#include <cstdint>

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

int mrope_axis(const std::array<int, 3>& section, int pair);  // 0 = t, 1 = h, 2 = w
double rope_inv_freq(const RopeParams& p, int pair);
void rope_cos_sin(const RopeParams& p, int64_t position, int pair, double* cos_out, double* sin_out);

// Rotates one head vector x[head_dim] in place; pos3 = (t, h, w) positions.
void rope_row(const RopeParams& p, const int64_t pos3[3], double* x);

// x: [tokens, p.heads, p.head_dim] rotated in place; rope_pos: [3, tokens].
// Tokens whose position is negative (padding) are left untouched.
void apply_rope(const RopeParams& p, const TensorI64& rope_pos, TensorD& x);

}  // namespace qsa
