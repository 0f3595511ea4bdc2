#include "reference/gate.hpp"

#include <cmath>

#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"

namespace qsa {

void apply_gate(const GateParams& p, const TensorD& attn, const TensorD& gate, TensorD& out) {
  if (attn.shape != gate.shape)
    throw InputError("gate: attention output has shape " + shape_to_string(attn.shape) +
                     " but the gate has shape " + shape_to_string(gate.shape) +
                     "; both must be [T, H, D]");
  if (out.shape != attn.shape) out = TensorD(attn.shape);
  const int64_t n = attn.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double sig = 1.0 / (1.0 + std::exp(-gate.data[i]));
    if (p.round_sigmoid) sig = round_bf16(sig);
    const double o = attn.data[i] * sig;
    out.data[i] = p.round_output ? round_bf16(o) : o;
  }
}

}  // namespace qsa
