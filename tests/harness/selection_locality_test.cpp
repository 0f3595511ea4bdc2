// Selection locality (harness/selection_locality.hpp): Jaccard of neighbouring
// rows and the union-tile reuse by hand, request boundaries, padding rows,
// empty slots and repeated ids, against a brute-force count on random
// selections, bad shapes.
#include <gtest/gtest.h>

#include <set>

#include "harness/selection_locality.hpp"
#include "reference/core/rng.hpp"

namespace qsa {
namespace {

TensorI32 ids_of(const std::vector<std::vector<int32_t>>& rows, int64_t width) {
  TensorI32 t(Shape{static_cast<int64_t>(rows.size()), width}, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t j = 0; j < rows[r].size(); ++j) t.at(static_cast<int64_t>(r), static_cast<int64_t>(j)) = rows[r][j];
  return t;
}

TEST(SelectionLocality, ByHandOneRequest) {
  // rows {1,2,3,4}, {3,4,5,6}, {5,6,7,8}: neighbours share 2 of 6 ids.
  const TensorI32 ids = ids_of({{1, 2, 3, 4}, {3, 4, 5, 6}, {5, 6, 7, 8}}, 4);
  const SelectionLocality l = selection_locality(ids, {0, 3}, {1, 2, 3});
  EXPECT_EQ(l.rows, 3);
  EXPECT_EQ(l.selected, 12);
  EXPECT_EQ(l.pairs, 2);
  EXPECT_DOUBLE_EQ(l.jaccard(), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(l.ids_per_row(), 4.0);
  ASSERT_EQ(l.tiles.size(), 3u);
  // R = 1: every row its own tile, nothing shared, nothing masked.
  EXPECT_EQ(l.tiles[0].tiles, 3);
  EXPECT_DOUBLE_EQ(l.tiles[0].reuse(), 1.0);
  EXPECT_DOUBLE_EQ(l.tiles[0].useful(), 1.0);
  // R = 2: tiles {r0, r1} (union 6) and {r2} (union 4).
  EXPECT_EQ(l.tiles[1].tiles, 2);
  EXPECT_EQ(l.tiles[1].unions, 10);
  EXPECT_EQ(l.tiles[1].slots, 2 * 6 + 1 * 4);
  EXPECT_DOUBLE_EQ(l.tiles[1].reuse(), 12.0 / 10.0);
  EXPECT_DOUBLE_EQ(l.tiles[1].useful(), 12.0 / 16.0);
  // R = 3: one tile, union {1..8}.
  EXPECT_EQ(l.tiles[2].unions, 8);
  EXPECT_DOUBLE_EQ(l.tiles[2].reuse(), 1.5);
  EXPECT_DOUBLE_EQ(l.tiles[2].useful(), 12.0 / 24.0);
}

TEST(SelectionLocality, TilesAndPairsStopAtRequests) {
  // Two requests with identical selections: a tile or a pair across the
  // boundary would see reuse and Jaccard 1; within each request there is one row.
  const TensorI32 ids = ids_of({{1, 2}, {1, 2}}, 2);
  const SelectionLocality l = selection_locality(ids, {0, 1, 2}, {2});
  EXPECT_EQ(l.pairs, 0);
  EXPECT_EQ(l.tiles[0].tiles, 2);
  EXPECT_DOUBLE_EQ(l.tiles[0].reuse(), 1.0);
  // The same rows as one request: one pair, one tile.
  const SelectionLocality one = selection_locality(ids, {0, 2}, {2});
  EXPECT_EQ(one.pairs, 1);
  EXPECT_DOUBLE_EQ(one.jaccard(), 1.0);
  EXPECT_DOUBLE_EQ(one.tiles[0].reuse(), 2.0);
  EXPECT_DOUBLE_EQ(one.tiles[0].useful(), 1.0);
}

TEST(SelectionLocality, IgnoresPaddingEmptySlotsAndRepeats) {
  // Row 1 repeats id 7 and has an empty slot; row 2 is padding (past the requests).
  const TensorI32 ids = ids_of({{7, 8, 9}, {7, 7, -1}, {1, 2, 3}}, 3);
  const SelectionLocality l = selection_locality(ids, {0, 2}, {2});
  EXPECT_EQ(l.rows, 2);
  EXPECT_EQ(l.selected, 3 + 1);
  EXPECT_DOUBLE_EQ(l.jaccard(), 1.0 / 3.0);
  EXPECT_EQ(l.tiles[0].unions, 3);
}

TEST(SelectionLocality, EmptyRowsBreakPairs) {
  const TensorI32 ids = ids_of({{1}, {}, {1}}, 1);
  const SelectionLocality l = selection_locality(ids, {0, 3}, {3});
  EXPECT_EQ(l.rows, 2);
  EXPECT_EQ(l.pairs, 0);
  // The empty row still sits in the tile: the union serves three rows.
  EXPECT_EQ(l.tiles[0].unions, 1);
  EXPECT_EQ(l.tiles[0].slots, 3);
  EXPECT_DOUBLE_EQ(l.tiles[0].useful(), 2.0 / 3.0);
}

TEST(SelectionLocality, MatchesBruteForceOnRandomSelections) {
  constexpr uint64_t kSeed = 20261201;
  const CounterRng rng(kSeed, "selection_locality");
  const std::vector<int32_t> qsl{0, 5, 5, 17, 40};
  const int64_t rows = 43;  // 3 padding rows
  const int64_t width = 6;
  TensorI32 ids(Shape{rows, width}, -1);
  uint64_t n = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      if (rng.uniform(n++) < 0.8) ids.at(r, j) = static_cast<int32_t>(rng.uniform(n++) * 12.0);
  const std::vector<int> heights{1, 2, 4, 7, 64};
  const SelectionLocality l = selection_locality(ids, qsl, heights);

  auto set_of = [&](int64_t r) {
    std::set<int32_t> s;
    for (int64_t j = 0; j < width; ++j)
      if (ids.at(r, j) >= 0) s.insert(ids.at(r, j));
    return s;
  };
  int64_t selected = 0;
  for (int64_t r = 0; r < qsl.back(); ++r) selected += static_cast<int64_t>(set_of(r).size());
  EXPECT_EQ(l.selected, selected) << "seed " << kSeed;
  for (size_t h = 0; h < heights.size(); ++h) {
    int64_t unions = 0, slots = 0, tiles = 0;
    for (size_t q = 0; q + 1 < qsl.size(); ++q)
      for (int64_t b = qsl[q]; b < qsl[q + 1]; b += heights[h]) {
        const int64_t e = std::min<int64_t>(qsl[q + 1], b + heights[h]);
        std::set<int32_t> u;
        for (int64_t r = b; r < e; ++r) {
          const std::set<int32_t> s = set_of(r);
          u.insert(s.begin(), s.end());
        }
        unions += static_cast<int64_t>(u.size());
        slots += (e - b) * static_cast<int64_t>(u.size());
        ++tiles;
      }
    EXPECT_EQ(l.tiles[h].unions, unions) << "R = " << heights[h] << ", seed " << kSeed;
    EXPECT_EQ(l.tiles[h].slots, slots) << "R = " << heights[h] << ", seed " << kSeed;
    EXPECT_EQ(l.tiles[h].tiles, tiles) << "R = " << heights[h] << ", seed " << kSeed;
    EXPECT_GE(l.tiles[h].reuse(), 1.0);
    EXPECT_LE(l.tiles[h].reuse(), static_cast<double>(heights[h]));
  }
}

TEST(SelectionLocality, AddSumsSteps) {
  const TensorI32 a = ids_of({{1, 2}, {2, 3}}, 2);
  const TensorI32 b = ids_of({{5}}, 2);
  SelectionLocality total;
  total.add(selection_locality(a, {0, 2}, {2}));
  total.add(selection_locality(b, {0, 1}, {2}));
  EXPECT_EQ(total.rows, 3);
  EXPECT_EQ(total.selected, 5);
  EXPECT_EQ(total.pairs, 1);
  EXPECT_EQ(total.tiles[0].tiles, 2);
  EXPECT_EQ(total.tiles[0].unions, 3 + 1);
  EXPECT_EQ(total.tiles[0].rows, 2);
}

TEST(SelectionLocality, CountedTokenIdsDropTheCountColumnAndWhatLiesPastIt) {
  // Counts 2, 0, 9 (clamped to the 3 id columns) and -4 (clamped to 0).
  const TensorI32 idx = ids_of({{5, 6, 7, 2}, {5, 6, 7, 0}, {5, 6, 7, 9}, {5, 6, 7, -4}}, 4);
  const TensorI32 ids = counted_token_ids(idx, true);
  EXPECT_EQ(ids.shape, (Shape{4, 3}));
  EXPECT_EQ(ids.data, (std::vector<int32_t>{5, 6, -1, -1, -1, -1, 5, 6, 7, -1, -1, -1}));
  EXPECT_EQ(counted_token_ids(idx, false).data, idx.data);
  EXPECT_THROW(counted_token_ids(TensorI32(Shape{4}), true), InputError);
  EXPECT_THROW(counted_token_ids(TensorI32(Shape{2, 0}), true), InputError);
}

TEST(SelectionLocality, RejectsBadShapes) {
  const TensorI32 ids = ids_of({{1}, {2}}, 1);
  EXPECT_THROW(selection_locality(ids, {0, 3}, {2}), InputError);     // more rows than block_ids has
  EXPECT_THROW(selection_locality(ids, {0, 2, 1}, {2}), InputError);  // decreasing
  EXPECT_THROW(selection_locality(ids, {1, 2}, {2}), InputError);     // not starting at 0
  EXPECT_THROW(selection_locality(ids, {}, {2}), InputError);
  EXPECT_THROW(selection_locality(ids, {0, 2}, {0}), InputError);     // tile height 0
  EXPECT_THROW(selection_locality(TensorI32(Shape{2}), {0, 2}, {2}), InputError);
}

}  // namespace
}  // namespace qsa
