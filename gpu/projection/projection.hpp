// Linear projections without bias on the GPU (index_qk_proj, q/k/v_proj,
// o_proj; reference/projection.hpp): y = x · w^T with bf16 inputs and fp32
// accumulation.
//
// Precision: both inputs are bf16, so every product x_k·w_k (8-bit by 8-bit
// significands) is exact in fp32 and only the running sum rounds. Each output
// element is one fmaf chain over k = 0, 1, ..., in_dim - 1 in that order,
// whatever the tile sizes and however many rows or columns the launch has,
// so a token's projection does not depend on how it was batched (the
// reference makes the same promise for its fp64 result). Both launchers run
// the same kernel and differ only in the store: launch_projection_bf16 writes
// exactly float_to_bf16_bits of what launch_projection writes with
// p.round_output on.
//
// Errors (thrown before any launch): ConfigError for rows < 0, in_dim <= 0
// or out_dim <= 0 (the reference's rule) and for rows >= 2^31; InputError
// for a null pointer when rows > 0. rows = 0 launches nothing and reads no
// pointer.
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

//   x: [p.rows, p.in_dim] bf16 bits, row-major
//   w: [p.out_dim, p.in_dim] bf16 bits (torch Linear layout)
//   y: [p.rows, p.out_dim] fp32; each value rounded to the nearest-even bf16
//      value (kept as fp32) when p.round_output
void launch_projection(const ProjectionParams& p, const uint16_t* x, const uint16_t* w, float* y,
                       hipStream_t stream);

// The same product stored as bf16 bits, y: [p.rows, p.out_dim]. A bf16 store
// always rounds (to nearest, ties to even), so p.round_output is ignored.
void launch_projection_bf16(const ProjectionParams& p, const uint16_t* x, const uint16_t* w, uint16_t* y,
                            hipStream_t stream);

}  // namespace qsa::gpu
