#include "reference/projection.hpp"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>

#include "reference/core/float_formats.hpp"

namespace qsa {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Eigen's GEMM blocking (and so its summation order) depends on the operand
// sizes. Fixing the tile height, rather than deriving it from the thread
// count, makes every tile the same product whichever thread runs it.
constexpr int64_t kRowTile = 64;

// Eigen routes a one-row product through GEMV, which sums in another order
// than GEMM; with two or more rows each output element comes out the same
// whatever the tile holds (checked by the chunked-prefill property test). A
// lone row is therefore computed as a two-row product, so a token's
// projection never depends on how the engine chunked or batched it.
void single_row_as_gemm(const double* x, const Eigen::Map<const RowMatrix>& wm, double* y) {
  RowMatrix x2(2, wm.cols());
  for (Eigen::Index k = 0; k < wm.cols(); ++k) x2(0, k) = x2(1, k) = x[k];
  const RowMatrix y2 = x2 * wm.transpose();
  std::copy_n(y2.data(), wm.rows(), y);
}

void check_params(const ProjectionParams& p) {
  if (p.rows < 0 || p.in_dim <= 0 || p.out_dim <= 0) {
    throw ConfigError(fmt::format(
        "projection params rows = {}, in_dim = {}, out_dim = {}: rows must be >= 0 and both "
        "dims positive",
        p.rows, p.in_dim, p.out_dim));
  }
}

}  // namespace

void project(const ProjectionParams& p, const TensorD& x, const TensorD& w, TensorD& y) {
  check_params(p);
  require_shape(x, {p.rows, p.in_dim}, "projection input x");
  // y may be a reused buffer of another shape; never alias it with x or w.
  if (&y == &x) throw InputError("projection output y aliases an input");
  project_rows(p, x.ptr(), w, y);
}

void project_rows(const ProjectionParams& p, const double* x, const TensorD& w, TensorD& y) {
  check_params(p);
  require_shape(w, {p.out_dim, p.in_dim}, "projection weight w");
  if (&y == &w || (!y.empty() && y.ptr() == x)) throw InputError("projection output y aliases an input");
  y = TensorD({p.rows, p.out_dim});

  const Eigen::Map<const RowMatrix> wm(w.ptr(), p.out_dim, p.in_dim);
  const int64_t tiles = (p.rows + kRowTile - 1) / kRowTile;

#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r0 = t * kRowTile;
    const int64_t nr = std::min(kRowTile, p.rows - r0);
    const Eigen::Map<const RowMatrix> xm(x + r0 * p.in_dim, nr, p.in_dim);
    Eigen::Map<RowMatrix> ym(y.ptr() + r0 * p.out_dim, nr, p.out_dim);
    if (nr == 1) {
      single_row_as_gemm(xm.data(), wm, ym.data());
    } else {
      ym.noalias() = xm * wm.transpose();
    }
    if (p.round_output) {
      double* out = ym.data();
      for (int64_t i = 0; i < nr * p.out_dim; ++i) out[i] = round_bf16(out[i]);
    }
  }
}

}  // namespace qsa
