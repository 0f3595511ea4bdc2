// Linear projections without bias (index_qk_proj, q/k/v_proj, o_proj).
// fp64 GEMM through Eigen, tiled over fixed blocks of rows so the summation
// order, and so every bit of the result, is independent of the thread count.
#pragma once

#include "reference/core/stage_params.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// x: [rows, in_dim], w: [out_dim, in_dim] -> y: [rows, out_dim], rounded to
// bf16 when p.round_output.
void project(const ProjectionParams& p, const TensorD& x, const TensorD& w, TensorD& y);

// The same over a raw row-major buffer of p.rows x p.in_dim values, for
// callers whose tensor has another shape over the same layout (the gated
// heads [T, H, D] read as [T, H·D]) and should not be copied.
void project_rows(const ProjectionParams& p, const double* x, const TensorD& w, TensorD& y);

}  // namespace qsa
