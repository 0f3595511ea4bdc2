// Tie-aware comparison of block selections and of the token-index rows
// expanded from them (compare.hpp). Rows are sorted id lists, so duplicated
// ids (a broken top-k) count as differences instead of vanishing in a set.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "harness/compare/compare.hpp"
#include "reference/parallel.hpp"

namespace qsa {
namespace {

void require_rank2_pair(const Shape& expected, const Shape& actual, const std::string& what) {
  if (expected.size() != 2) {
    throw InputError(what + ": expected has shape " + shape_to_string(expected) + ", need [rows, width]");
  }
  if (actual != expected) {
    throw InputError(what + ": actual has shape " + shape_to_string(actual) + " but expected has " +
                     shape_to_string(expected));
  }
}

void require_mask(const std::vector<bool>* mask, int64_t rows, const std::string& what) {
  if (mask && static_cast<int64_t>(mask->size()) != rows) {
    throw InputError(what + " has " + std::to_string(mask->size()) + " entries for " + std::to_string(rows) +
                     " rows");
  }
}

struct Entry {
  int32_t id;
  double score;
};

// One side of a row: valid entries (id >= 0) with their scores (NaN when the
// side recorded none) and the lowest selected score s_k.
struct Side {
  std::vector<Entry> entries;
  std::vector<int32_t> sorted_ids;
  double kth = HUGE_VAL;
  bool has_scores = false;
};

Side read_side(const TensorI32& ids, const TensorD& scores, int64_t row) {
  Side s;
  s.has_scores = !scores.empty();
  const int64_t width = ids.shape[1];
  for (int64_t c = 0; c < width; ++c) {
    const int32_t id = ids.at(row, c);
    if (id < 0) continue;
    const double score = s.has_scores ? scores.at(row, c) : std::nan("");
    s.entries.push_back({id, score});
    s.sorted_ids.push_back(id);
    s.kth = std::min(s.kth, score);
  }
  std::sort(s.sorted_ids.begin(), s.sorted_ids.end());
  return s;
}

struct RowResult {
  bool identical = false;
  bool set_equal = false;
  int64_t tie_flips = 0;
  int64_t real = 0;
  double jaccard = 1.0;
};

// Ids selected by `side` only: each is a tie flip when it sat within the tie
// band of that side's k-th score, else real. `eligible` is false unless both
// rows are full (see compare.hpp).
void classify(const Side& side, const std::vector<int32_t>& only, bool eligible, double tie_tol, RowResult& r) {
  for (int32_t id : only) {
    bool tie = false;
    if (eligible && side.has_scores) {
      const auto it =
          std::find_if(side.entries.begin(), side.entries.end(), [&](const Entry& e) { return e.id == id; });
      const double band = tie_tol * std::max(1.0, std::fabs(side.kth));
      tie = std::fabs(it->score - side.kth) <= band;  // NaN compares false: real
    }
    ++(tie ? r.tie_flips : r.real);
  }
}

RowResult compare_row(const TensorI32& e_ids, const TensorD& e_scores, const TensorI32& a_ids,
                      const TensorD& a_scores, double tie_tol, int64_t row) {
  RowResult r;
  const int64_t width = e_ids.shape[1];
  r.identical = std::equal(e_ids.row(row), e_ids.row(row) + width, a_ids.row(row));
  const Side e = read_side(e_ids, e_scores, row);
  const Side a = read_side(a_ids, a_scores, row);
  r.set_equal = e.sorted_ids == a.sorted_ids;
  if (r.set_equal) return r;

  std::vector<int32_t> common, e_only, a_only;
  std::set_intersection(e.sorted_ids.begin(), e.sorted_ids.end(), a.sorted_ids.begin(), a.sorted_ids.end(),
                        std::back_inserter(common));
  std::set_difference(e.sorted_ids.begin(), e.sorted_ids.end(), a.sorted_ids.begin(), a.sorted_ids.end(),
                      std::back_inserter(e_only));
  std::set_difference(a.sorted_ids.begin(), a.sorted_ids.end(), e.sorted_ids.begin(), e.sorted_ids.end(),
                      std::back_inserter(a_only));
  const auto inter = static_cast<double>(common.size());
  const auto uni = static_cast<double>(e.sorted_ids.size() + a.sorted_ids.size()) - inter;
  r.jaccard = inter / uni;  // uni > 0: the sets differ

  const bool eligible = static_cast<int64_t>(e.sorted_ids.size()) == width &&
                        static_cast<int64_t>(a.sorted_ids.size()) == width;
  classify(e, e_only, eligible, tie_tol, r);
  classify(a, a_only, eligible, tie_tol, r);
  return r;
}

std::vector<int32_t> token_set(const TensorI32& t, int64_t row, int64_t id_columns) {
  std::vector<int32_t> ids;
  for (int64_t c = 0; c < id_columns; ++c) {
    if (t.at(row, c) >= 0) ids.push_back(t.at(row, c));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

SelectionDiff compare_selection(const TensorI32& expected_ids, const TensorD& expected_scores,
                                const TensorI32& actual_ids, const TensorD& actual_scores, double tie_tol,
                                const std::vector<bool>* row_mask) {
  require_rank2_pair(expected_ids.shape, actual_ids.shape, "block_ids");
  if (!expected_scores.empty()) require_shape(expected_scores, expected_ids.shape, "expected block_scores");
  if (!actual_scores.empty()) require_shape(actual_scores, actual_ids.shape, "actual block_scores");
  const int64_t rows = expected_ids.shape[0];
  require_mask(row_mask, rows, "block_ids row mask");

  std::vector<RowResult> per_row(static_cast<size_t>(rows));
  parallel_for(rows, [&](int64_t r) {
    if (row_mask && !(*row_mask)[static_cast<size_t>(r)]) return;
    per_row[static_cast<size_t>(r)] =
        compare_row(expected_ids, expected_scores, actual_ids, actual_scores, tie_tol, r);
  });

  SelectionDiff d;
  d.tie_tol = tie_tol;
  d.tie_rows.assign(static_cast<size_t>(rows), false);
  double jaccard_sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    if (row_mask && !(*row_mask)[static_cast<size_t>(r)]) continue;
    const RowResult& x = per_row[static_cast<size_t>(r)];
    ++d.rows;
    d.identical_rows += x.identical ? 1 : 0;
    d.set_equal_rows += x.set_equal ? 1 : 0;
    d.tie_flips += x.tie_flips;
    d.real_mismatches += x.real;
    d.tie_rows[static_cast<size_t>(r)] = !x.set_equal && x.real == 0;
    jaccard_sum += x.jaccard;
    if (x.jaccard < d.min_jaccard) {
      d.min_jaccard = x.jaccard;
      d.worst_row = r;
    }
  }
  d.mean_jaccard = d.rows > 0 ? jaccard_sum / static_cast<double>(d.rows) : 1.0;
  d.pass = d.real_mismatches == 0;
  return d;
}

TokenIndexDiff compare_token_index(const TensorI32& expected, const TensorI32& actual, bool count_column,
                                   const std::vector<bool>* tie_rows, const std::vector<bool>* row_mask) {
  require_rank2_pair(expected.shape, actual.shape, "token_idx");
  const int64_t rows = expected.shape[0];
  const int64_t cols = expected.shape[1];
  if (count_column && cols < 1) throw InputError("token_idx has no column to hold the count");
  require_mask(row_mask, rows, "token_idx row mask");
  require_mask(tie_rows, rows, "token_idx tie rows");
  const int64_t id_columns = cols - (count_column ? 1 : 0);

  TokenIndexDiff d;
  for (int64_t r = 0; r < rows; ++r) {
    if (row_mask && !(*row_mask)[static_cast<size_t>(r)]) continue;
    ++d.rows;
    const bool count_differs = count_column && expected.at(r, cols - 1) != actual.at(r, cols - 1);
    const bool sets_differ = token_set(expected, r, id_columns) != token_set(actual, r, id_columns);
    d.count_mismatches += count_differs ? 1 : 0;
    if (!count_differs && !sets_differ) {
      ++d.set_equal_rows;
    } else if (tie_rows && (*tie_rows)[static_cast<size_t>(r)]) {
      ++d.tie_rows;
    } else {
      ++d.real_mismatch_rows;
      if (d.first_bad_row < 0) d.first_bad_row = r;
    }
  }
  d.pass = d.real_mismatch_rows == 0;
  return d;
}

}  // namespace qsa
