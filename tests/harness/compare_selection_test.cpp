// Tie-aware selection and token-index comparison: identical rows, order-only
// differences, tie flips inside the band, real mismatches outside it, rows
// that cannot hold a tie flip, Jaccard by hand, padding rows, count columns.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness/compare/compare.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5e1ec7edULL;
constexpr int64_t kRows = 4;
constexpr int64_t kBlocks = 4;  // K_B

// Every row selects blocks 10r .. 10r+3 with random descending scores in
// (1, 3): |s_k| > 1, so the tie band is tie_tol * |s_k|.
struct Selection {
  TensorI32 ids{Shape{kRows, kBlocks}};
  TensorD scores{Shape{kRows, kBlocks}};
};

Selection make_selection() {
  Selection s;
  const CounterRng rng(kSeed, "selection_scores");
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<double> row(kBlocks);
    for (int64_t c = 0; c < kBlocks; ++c) {
      row[static_cast<size_t>(c)] = 1.0 + 2.0 * rng.uniform(static_cast<uint64_t>(r * kBlocks + c));
    }
    std::sort(row.rbegin(), row.rend());
    for (int64_t c = 0; c < kBlocks; ++c) {
      s.ids.at(r, c) = static_cast<int32_t>(10 * r + c);
      s.scores.at(r, c) = row[static_cast<size_t>(c)];
    }
  }
  return s;
}

double band(double kth) { return tol::kCompareTestTieTol * std::max(1.0, std::fabs(kth)); }

TEST(CompareSelection, IdenticalRowsPass) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Selection e = make_selection();
  const SelectionDiff d = compare_selection(e.ids, e.scores, e.ids, e.scores, tol::kCompareTestTieTol);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.rows, kRows);
  EXPECT_EQ(d.identical_rows, kRows);
  EXPECT_EQ(d.set_equal_rows, kRows);
  EXPECT_EQ(d.tie_flips + d.real_mismatches, 0);
  EXPECT_EQ(d.mean_jaccard, 1.0);
  EXPECT_EQ(d.worst_row, -1);
  EXPECT_EQ(std::count(d.tie_rows.begin(), d.tie_rows.end(), true), 0);
}

TEST(CompareSelection, OrderOnlyDifferenceIsSetEqualAndPasses) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Selection e = make_selection();
  Selection a = e;
  std::swap(a.ids.at(1, 0), a.ids.at(1, 3));
  std::swap(a.scores.at(1, 0), a.scores.at(1, 3));
  const SelectionDiff d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.identical_rows, kRows - 1);
  EXPECT_EQ(d.set_equal_rows, kRows);
  EXPECT_EQ(d.min_jaccard, 1.0);
}

TEST(CompareSelection, TieFlipWithinTheBandPasses) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Selection e = make_selection();
  Selection a = e;
  // Row 2: the actual side dropped the expected k-th block 23 and took block
  // 99, scored just inside the band above its own k-th score (block 22's).
  const double a_kth = e.scores.at(2, 2);
  a.ids.at(2, 2) = 99;
  a.scores.at(2, 2) = a_kth + tol::kCompareInsideFactor * band(a_kth);
  a.ids.at(2, 3) = 22;
  a.scores.at(2, 3) = a_kth;
  SelectionDiff d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.tie_flips, 2);  // block 23 on the expected side, 99 on the actual side
  EXPECT_EQ(d.real_mismatches, 0);
  EXPECT_EQ(d.set_equal_rows, kRows - 1);
  EXPECT_TRUE(d.tie_rows[2]);
  EXPECT_FALSE(d.tie_rows[1]);
  // Jaccard by hand: 3 shared ids of 5 in row 2, 1 elsewhere.
  EXPECT_DOUBLE_EQ(d.min_jaccard, 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(d.mean_jaccard, (3.0 + 3.0 / 5.0) / 4.0);
  EXPECT_EQ(d.worst_row, 2);

  // The same block scored outside the band is a real mismatch.
  a.scores.at(2, 2) = a_kth + tol::kCompareOutsideFactor * band(a_kth);
  d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.tie_flips, 1);
  EXPECT_EQ(d.real_mismatches, 1);
  EXPECT_FALSE(d.tie_rows[2]);
}

TEST(CompareSelection, FarOffDifferenceIsARealMismatch) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const Selection e = make_selection();
  Selection a = e;
  // Row 3: the top-scored block is replaced; on the expected side it sits far
  // above the k-th score, so it cannot be a tie flip.
  a.ids.at(3, 0) = 77;
  const double e_kth = e.scores.at(3, kBlocks - 1);
  ASSERT_GT(e.scores.at(3, 0) - e_kth, tol::kCompareOutsideFactor * band(e_kth));
  // Rows 0 and 1: two replaced blocks each.
  a.ids.at(0, 0) = 70;
  a.ids.at(0, 1) = 71;
  const SelectionDiff d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.real_mismatches, 6);  // 2 ids per side in row 0, 1 per side in row 3
  EXPECT_FALSE(d.tie_rows[3]);
  // Jaccard by hand: row 0 shares 2 of 6 ids, row 3 shares 3 of 5.
  EXPECT_DOUBLE_EQ(d.min_jaccard, 2.0 / 6.0);
  EXPECT_EQ(d.worst_row, 0);
  EXPECT_DOUBLE_EQ(d.mean_jaccard, (2.0 / 6.0 + 1.0 + 1.0 + 3.0 / 5.0) / 4.0);
}

TEST(CompareSelection, RowsThatAreNotFullHaveNoTieFlips) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  Selection e = make_selection();
  // Row 1 holds 3 valid blocks (every visible block): a swap at the cut is a
  // visibility error, however close the scores.
  e.ids.at(1, 3) = -1;
  Selection a = e;
  a.ids.at(1, 2) = 55;
  SelectionDiff d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.tie_flips, 0);
  EXPECT_EQ(d.real_mismatches, 2);
  // Different valid counts: the extra block is real too.
  a = e;
  a.ids.at(1, 3) = 13;
  d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.real_mismatches, 1);
  EXPECT_DOUBLE_EQ(d.min_jaccard, 3.0 / 4.0);
}

TEST(CompareSelection, WithoutScoresEveryDifferenceIsReal) {
  const Selection e = make_selection();
  Selection a = e;
  a.ids.at(2, 3) = 99;
  const SelectionDiff d = compare_selection(e.ids, TensorD{}, a.ids, TensorD{}, tol::kCompareTestTieTol);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.real_mismatches, 2);
}

TEST(CompareSelection, RowMaskSkipsPaddingAndShapesAreChecked) {
  const Selection e = make_selection();
  Selection a = e;
  a.ids.at(3, 0) = 77;
  const std::vector<bool> mask = {true, true, true, false};
  const SelectionDiff d = compare_selection(e.ids, e.scores, a.ids, a.scores, tol::kCompareTestTieTol, &mask);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.rows, kRows - 1);
  const TensorI32 narrow(Shape{kRows, kBlocks - 1});
  EXPECT_THROW(compare_selection(e.ids, e.scores, narrow, TensorD{}, tol::kCompareTestTieTol), InputError);
  const TensorD bad_scores(Shape{kRows, 1});
  EXPECT_THROW(compare_selection(e.ids, bad_scores, a.ids, a.scores, tol::kCompareTestTieTol), InputError);
}

// Token rows of width W = 5 plus a count column.
TensorI32 token_rows(const std::vector<std::vector<int32_t>>& rows) {
  TensorI32 t(Shape{static_cast<int64_t>(rows.size()), 6}, -1);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) t.at(static_cast<int64_t>(r), static_cast<int64_t>(c)) = rows[r][c];
  }
  return t;
}

TEST(CompareTokenIndex, SetsCountsAndTieRows) {
  // Row 0: same ids in another order. Row 1: other ids, explained by a tie
  // flip. Row 2: same ids, different count. Row 3: padding, all -1, count 0.
  TensorI32 e = token_rows({{0, 1, 2, 3, -1, 4}, {4, 5, 6, -1, -1, 3}, {8, 9, -1, -1, -1, 2}, {}});
  TensorI32 a = token_rows({{3, 2, 1, 0, -1, 4}, {4, 5, 7, 9, -1, 4}, {8, 9, -1, -1, -1, 3}, {}});
  e.at(3, 5) = 0;
  a.at(3, 5) = 0;
  const std::vector<bool> ties = {false, true, false, false};
  TokenIndexDiff d = compare_token_index(e, a, true, &ties);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.rows, 4);
  EXPECT_EQ(d.set_equal_rows, 2);
  EXPECT_EQ(d.tie_rows, 1);
  EXPECT_EQ(d.real_mismatch_rows, 1);
  EXPECT_EQ(d.count_mismatches, 2);
  EXPECT_EQ(d.first_bad_row, 2);

  const std::vector<bool> more_ties = {false, true, true, false};
  d = compare_token_index(e, a, true, &more_ties);
  EXPECT_TRUE(d.pass);  // count mismatches only on tie rows
  EXPECT_EQ(d.tie_rows, 2);

  // Without a count column the last column is an id like any other.
  d = compare_token_index(e, a, false, &more_ties);
  EXPECT_EQ(d.count_mismatches, 0);
  EXPECT_EQ(d.set_equal_rows, 2);

  const std::vector<bool> mask = {true, false, false, true};
  d = compare_token_index(e, a, true, nullptr, &mask);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.rows, 2);
}

}  // namespace
}  // namespace qsa
