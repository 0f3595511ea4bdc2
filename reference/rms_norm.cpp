#include "reference/rms_norm.hpp"

#include <fmt/format.h>

#include <cmath>

#include "reference/core/float_formats.hpp"

namespace qsa {

void gemma_rms_norm_row(const RmsNormParams& p, const double* x, const double* w, double* y) {
  double sum_sq = 0.0;
  for (int i = 0; i < p.dim; ++i) sum_sq += x[i] * x[i];
  const double rms = std::sqrt(sum_sq / p.dim + p.eps);
  // Engines round once, after the gain; rounding the normalised value before
  // multiplying by (1 + w) would be a second, spurious bf16 step. The sum is
  // complete before the first write, so x and y may be the same buffer.
  for (int i = 0; i < p.dim; ++i) {
    const double v = x[i] / rms * (1.0 + w[i]);
    y[i] = p.round_output ? round_bf16(v) : v;
  }
}

void gemma_rms_norm(const RmsNormParams& p, const TensorD& x, const TensorD& w, TensorD& y) {
  if (p.rows < 0 || p.dim <= 0 || !(p.eps >= 0.0)) {
    throw ConfigError(fmt::format(
        "rms norm params rows = {}, dim = {}, eps = {}: rows must be >= 0, dim positive, eps >= 0",
        p.rows, p.dim, p.eps));
  }
  if (x.numel() != p.rows * p.dim) {
    throw InputError(
        fmt::format("rms norm input x has shape {} ({} values), expected {} rows of {}",
                    shape_to_string(x.shape), x.numel(), p.rows, p.dim));
  }
  require_shape(w, {p.dim}, "rms norm weight w");
  if (&y == &w) throw InputError("rms norm output y aliases the weight w");
  if (&y != &x) {
    y.shape = x.shape;
    y.data.resize(x.data.size());
  }

  const double* xp = x.ptr();
  double* yp = y.ptr();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < p.rows; ++r) {
    gemma_rms_norm_row(p, xp + r * p.dim, w.ptr(), yp + r * p.dim);
  }
}

}  // namespace qsa
