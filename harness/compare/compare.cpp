// Element-wise comparison of floating and integer tensors (compare.hpp).
// Rows are compared in fixed chunks whose boundaries depend only on the
// shape, and the chunks' partial results are merged in order, so every
// metric (sums included) is bit-identical for any thread count.
#include "harness/compare/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "reference/core/float_formats.hpp"

namespace qsa {
namespace {

// Elements per chunk: large enough to amortise the scheduling, small enough
// to spread a [T, hidden] tensor over the threads.
constexpr int64_t kChunkElements = 8192;

struct Candidate {
  int64_t index = -1;
  double err = 0.0;  // only errors > 0 become candidates
  double expected = 0.0;
  double actual = 0.0;
  double abs_err = 0.0;
  double rel_err = 0.0;
};

struct Partial {
  int64_t count = 0;
  int64_t mismatches = 0;
  int64_t nonfinite = 0;
  double diff_sq = 0.0;
  double expected_sq = 0.0;
  double actual_sq = 0.0;
  Candidate worst_abs;
  Candidate worst_rel;
  std::array<int64_t, kUlpBuckets> hist{};
};

// Strictly greater: among equal errors the lowest index (seen first) stays.
void offer(Candidate& best, const Candidate& c) {
  if (c.err > best.err) best = c;
}

double rel_error(double e, double a, double abs_err) {
  if (e == 0.0) return a == 0.0 ? 0.0 : HUGE_VAL;
  return abs_err / std::fabs(e);
}

// One element pair. Integers bucket |a - e| (their ulp is 1); floats bucket
// the bf16 ULP distance.
void accumulate(Partial& p, int64_t index, double e, double a, const Tolerance& tol, bool integer) {
  ++p.count;
  const bool fe = std::isfinite(e);
  const bool fa = std::isfinite(a);
  if (!fe || !fa) {
    const bool both_nan = std::isnan(e) && std::isnan(a);
    const bool same_inf = std::isinf(e) && std::isinf(a) && (e > 0) == (a > 0);
    if (!both_nan && !same_inf) {
      ++p.nonfinite;
      const Candidate c{index, HUGE_VAL, e, a, HUGE_VAL, HUGE_VAL};
      offer(p.worst_abs, c);
      offer(p.worst_rel, c);
    }
    return;
  }
  const double abs_err = std::fabs(a - e);
  const double rel_err = rel_error(e, a, abs_err);
  if (abs_err > tol.abs + tol.rel * std::fabs(e)) ++p.mismatches;
  p.diff_sq += abs_err * abs_err;
  p.expected_sq += e * e;
  p.actual_sq += a * a;
  if (abs_err > 0.0) offer(p.worst_abs, Candidate{index, abs_err, e, a, abs_err, rel_err});
  if (rel_err > 0.0) offer(p.worst_rel, Candidate{index, rel_err, e, a, abs_err, rel_err});
  const int64_t distance = integer ? static_cast<int64_t>(abs_err) : bf16_ulp_distance(e, a);
  ++p.hist[static_cast<size_t>(ulp_bucket(distance))];
}

std::vector<int64_t> unravel(int64_t index, const Shape& shape) {
  std::vector<int64_t> coords(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = index % shape[i];
    index /= shape[i];
  }
  return coords;
}

WorstElement to_worst(const Candidate& c, const Shape& shape) {
  WorstElement w;
  if (c.index < 0) return w;
  w.coords = unravel(c.index, shape);
  w.expected = c.expected;
  w.actual = c.actual;
  w.abs_err = c.abs_err;
  w.rel_err = c.rel_err;
  return w;
}

std::vector<std::string> axis_names(const std::vector<std::string>& given, size_t rank) {
  std::vector<std::string> names(rank);
  for (size_t i = 0; i < rank; ++i) names[i] = i < given.size() ? given[i] : "d" + std::to_string(i);
  return names;
}

template <class T>
TensorDiff compare_impl(const std::string& stage, const Tensor<T>& expected, const Tensor<T>& actual,
                        const Tolerance& tol, const std::vector<std::string>& dims,
                        const std::vector<bool>* row_mask, bool integer) {
  if (expected.shape != actual.shape) {
    throw InputError("stage '" + stage + "': actual has shape " + shape_to_string(actual.shape) +
                     " but expected has " + shape_to_string(expected.shape) +
                     " (a producer recorded a different layout, or the config differs)");
  }
  const int64_t rows = expected.shape.empty() ? 1 : expected.shape[0];
  if (row_mask && (expected.shape.empty() || static_cast<int64_t>(row_mask->size()) != rows)) {
    throw InputError("stage '" + stage + "': row mask has " + std::to_string(row_mask->size()) +
                     " entries for shape " + shape_to_string(expected.shape) +
                     " (one entry per leading-dimension row is needed)");
  }
  TensorDiff d;
  d.stage = stage;
  d.shape = expected.shape;
  d.dims = axis_names(dims, expected.shape.size());
  d.tol = tol;

  const int64_t row_len = rows > 0 ? expected.numel() / rows : 0;
  const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, row_len));
  const int64_t chunks = (rows + chunk_rows - 1) / chunk_rows;
  std::vector<Partial> parts(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    Partial& p = parts[static_cast<size_t>(ch)];
    const int64_t end = std::min(rows, (ch + 1) * chunk_rows);
    for (int64_t r = ch * chunk_rows; r < end; ++r) {
      if (row_mask && !(*row_mask)[static_cast<size_t>(r)]) continue;
      for (int64_t i = r * row_len; i < (r + 1) * row_len; ++i) {
        const auto k = static_cast<size_t>(i);
        accumulate(p, i, static_cast<double>(expected.data[k]), static_cast<double>(actual.data[k]), tol,
                   integer);
      }
    }
  }

  Partial total;
  for (const Partial& p : parts) {
    total.count += p.count;
    total.mismatches += p.mismatches;
    total.nonfinite += p.nonfinite;
    total.diff_sq += p.diff_sq;
    total.expected_sq += p.expected_sq;
    total.actual_sq += p.actual_sq;
    offer(total.worst_abs, p.worst_abs);
    offer(total.worst_rel, p.worst_rel);
    for (size_t b = 0; b < total.hist.size(); ++b) total.hist[b] += p.hist[b];
  }
  d.count = total.count;
  d.mismatches = total.mismatches;
  d.nonfinite_mismatches = total.nonfinite;
  if (total.expected_sq > 0.0) {
    d.rel_l2 = std::sqrt(total.diff_sq) / std::sqrt(total.expected_sq);
  } else {
    d.rel_l2 = total.actual_sq == 0.0 ? 0.0 : HUGE_VAL;
  }
  d.worst_abs = to_worst(total.worst_abs, d.shape);
  d.worst_rel = to_worst(total.worst_rel, d.shape);
  d.ulp_hist = total.hist;
  const bool l2_ok = tol.rel_l2 < 0.0 || d.rel_l2 <= tol.rel_l2;
  d.pass = d.mismatches == 0 && d.nonfinite_mismatches == 0 && l2_ok;
  return d;
}

}  // namespace

std::string ulp_bucket_label(int bucket) {
  static const char* const kLabels[kUlpBuckets] = {"0", "1", "2", "3-4", "5-8", "9-16", "17-64", ">64"};
  if (bucket < 0 || bucket >= kUlpBuckets) throw InternalError("ulp bucket out of range");
  return kLabels[bucket];
}

int ulp_bucket(int64_t distance) {
  if (distance <= 2) return static_cast<int>(std::max<int64_t>(0, distance));
  if (distance <= 4) return 3;
  if (distance <= 8) return 4;
  if (distance <= 16) return 5;
  if (distance <= 64) return 6;
  return 7;
}

// bf16 patterns are sign-magnitude; mapping negatives to -(magnitude) makes
// the integers monotonic in the value with +0 and -0 equal, so their
// difference counts the representable values in between.
int64_t bf16_ulp_distance(double a, double b) {
  auto ordered = [](double x) {
    const uint16_t bits = bf16_bits(x);
    const int64_t magnitude = bits & 0x7FFF;
    return (bits & 0x8000) ? -magnitude : magnitude;
  };
  return std::llabs(ordered(a) - ordered(b));
}

std::string format_coords(const std::vector<int64_t>& coords, const std::vector<std::string>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < coords.size(); ++i) {
    if (i) out += ", ";
    out += (i < dims.size() ? dims[i] : "d" + std::to_string(i)) + "=" + std::to_string(coords[i]);
  }
  return out + "]";
}

TensorDiff compare_tensors(const std::string& stage, const TensorD& expected, const TensorD& actual,
                           const Tolerance& tol, const std::vector<std::string>& dims,
                           const std::vector<bool>* row_mask) {
  return compare_impl(stage, expected, actual, tol, dims, row_mask, false);
}

TensorDiff compare_exact(const std::string& stage, const TensorI32& expected, const TensorI32& actual,
                         const std::vector<std::string>& dims, const std::vector<bool>* row_mask) {
  Tolerance exact;
  exact.why = "exact: integer values must match";
  return compare_impl(stage, expected, actual, exact, dims, row_mask, true);
}

}  // namespace qsa
