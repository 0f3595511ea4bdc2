// The one comparator: used by the tests, `qsa replay` and the sweeps.
//
// Floating stages: NaN/Inf masks must agree first; then each element passes
// when |a - e| <= abs + rel·|e|; then the whole tensor must have relative L2
// error ||a - e|| / ||e|| <= rel_l2. The worst elements are reported with
// their coordinates, and a histogram of bf16 ULP distances shows whether
// differences are rounding-sized.
//
// Selections (block ids): compared per row as sets. A block selected on one
// side only is a tie flip, not an error, when its score lies within
// tie_tol·max(1, |s_k|) of that side's k-th (lowest selected) score s_k;
// otherwise it is a real mismatch. Order within a row is reported but never
// fails a comparison (engines' top-k order is unspecified). A flip swaps one
// block for another at the cut, so it needs both rows full (K_B valid ids):
// rows with fewer valid ids selected every visible block, and a difference
// there (or in the number of valid ids) is always real.
//
// docs/replay.md ("How stages are compared") explains every metric.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/core/tensor.hpp"

namespace qsa {

// rel_l2 >= 0 bounds the relative L2 error (0: the tensors must be equal);
// a negative rel_l2 means "no global bound", leaving only the element rule.
// The default (all zero) is exact equality.
struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
  double rel_l2 = 0.0;
  std::string why;  // the formula, printed in reports
};

struct WorstElement {
  std::vector<int64_t> coords;  // empty when there is none
  double expected = 0.0;
  double actual = 0.0;
  double abs_err = 0.0;
  double rel_err = 0.0;
};

// bf16 ULP distance buckets: 0, 1, 2, 3-4, 5-8, 9-16, 17-64, >64. Both values
// are rounded to bf16 and the distance counts representable bf16 values
// between them (+0 and -0 are one value). Integer tensors (compare_exact)
// bucket |a - e| instead: an integer's ulp is 1.
inline constexpr int kUlpBuckets = 8;
std::string ulp_bucket_label(int bucket);
int ulp_bucket(int64_t distance);
int64_t bf16_ulp_distance(double a, double b);  // both finite

// "[row=1, head=0, dim=3]"; `dims` as stored in TensorDiff::dims.
std::string format_coords(const std::vector<int64_t>& coords, const std::vector<std::string>& dims);

struct TensorDiff {
  std::string stage;
  int step = -1;
  Shape shape;
  std::vector<std::string> dims;    // one name per axis ("d<i>" where none was given)
  int64_t count = 0;                // elements compared
  int64_t mismatches = 0;           // elements outside abs + rel·|e|
  int64_t nonfinite_mismatches = 0; // NaN/Inf mask disagreements
  double rel_l2 = 0.0;
  WorstElement worst_abs;
  WorstElement worst_rel;
  std::array<int64_t, kUlpBuckets> ulp_hist{};
  Tolerance tol;
  bool pass = true;
};

// `dims` names the axes for coordinates ("row", "head", "dim"). Rows whose
// `row_mask` entry is false (padding) are skipped when a mask is given.
// Both-NaN and equal infinities agree and stay out of the numeric metrics;
// a mask disagreement becomes the worst element (errors +inf) when it is the
// first one, so its coordinates are reported. InputError for different
// shapes or a mask whose length is not shape[0].
TensorDiff compare_tensors(const std::string& stage, const TensorD& expected, const TensorD& actual,
                           const Tolerance& tol, const std::vector<std::string>& dims,
                           const std::vector<bool>* row_mask = nullptr);

// Integer tensors that must match exactly (token ids, slots, counts).
TensorDiff compare_exact(const std::string& stage, const TensorI32& expected, const TensorI32& actual,
                         const std::vector<std::string>& dims, const std::vector<bool>* row_mask = nullptr);

struct SelectionDiff {
  std::string stage = "block_ids";
  int step = -1;
  int64_t rows = 0;
  int64_t identical_rows = 0;   // same ids in the same order
  int64_t set_equal_rows = 0;   // same ids in any order
  int64_t tie_flips = 0;        // differing ids within the tie tolerance
  int64_t real_mismatches = 0;  // differing ids outside it
  double mean_jaccard = 1.0;
  double min_jaccard = 1.0;
  int64_t worst_row = -1;       // lowest Jaccard
  double tie_tol = 0.0;
  std::vector<bool> tie_rows;   // [T] rows that differ by tie flips only
  bool pass = true;             // no real mismatch
};

// ids: [T, K_B] valid prefix then -1; scores: [T, K_B] (may be empty: then
// every differing id is a real mismatch).
SelectionDiff compare_selection(const TensorI32& expected_ids, const TensorD& expected_scores,
                                const TensorI32& actual_ids, const TensorD& actual_scores, double tie_tol,
                                const std::vector<bool>* row_mask = nullptr);

// Token-index rows ([T, W] or [T, W+1]): per-row sets of valid ids plus the
// count column when present. A row whose block selection differed only by
// tie flips is expected to differ here too; `tie_rows` marks such rows so
// they count as tie-induced rather than real.
struct TokenIndexDiff {
  int step = -1;
  int64_t rows = 0;
  int64_t set_equal_rows = 0;   // same ids (any order) and, with a count column, same count
  int64_t tie_rows = 0;
  int64_t real_mismatch_rows = 0;
  int64_t count_mismatches = 0;
  int64_t first_bad_row = -1;
  bool pass = true;
};
TokenIndexDiff compare_token_index(const TensorI32& expected, const TensorI32& actual, bool count_column,
                                   const std::vector<bool>* tie_rows, const std::vector<bool>* row_mask = nullptr);

}  // namespace qsa
