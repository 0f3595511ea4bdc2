// Block scores, visibility and canonical top-k (spec section 5): the ReLU
// head sum, NaN handling, the canonical order (NaN first, descending, ties to
// the lower id), -1 padding, and a tiled select_rows that is bit-identical to
// scoring each row alone, whatever the thread count.
#include "reference/select.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5e1ec7ULL;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

SelectParams params(int heads, int dim, int blocks_budget, double scale) {
  SelectParams p;
  p.heads = heads;
  p.dim = dim;
  p.blocks_budget = blocks_budget;
  p.score_scale = scale;
  return p;
}

TensorD normal_tensor(Shape shape, const char* name) {
  TensorD t(std::move(shape));
  CounterRng rng(kSeed, name);
  for (int64_t i = 0; i < t.numel(); ++i) t.at(i) = rng.normal(i);
  return t;
}

// Small integers: every dot and sum is exact in fp64, so expectations need no
// tolerance.
TensorD integer_tensor(Shape shape, const char* name) {
  TensorD t(std::move(shape));
  CounterRng rng(kSeed, name);
  for (int64_t i = 0; i < t.numel(); ++i) t.at(i) = std::floor(rng.uniform(i) * 9.0) - 4.0;
  return t;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// ---- block scores -----------------------------------------------------------

TEST(SelectScores, ReluClipsNegativeHeads) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const int H = 4, d = 16, n = 40;
  const TensorD q = integer_tensor({H, d}, "q");
  const TensorD kc = integer_tensor({n, d}, "kc");
  std::vector<double> scores(n);
  block_scores_row(params(H, d, 8, 0.5), q.ptr(), kc.ptr(), n, scores.data());
  int clipped = 0;
  for (int b = 0; b < n; ++b) {
    double relu_sum = 0.0;
    for (int h = 0; h < H; ++h) {
      double dot = 0.0;
      for (int j = 0; j < d; ++j) dot += q.at(h, j) * kc.at(b, j);
      relu_sum += std::max(dot, 0.0);
      clipped += dot < 0.0;
    }
    EXPECT_EQ(scores[b], 0.5 * relu_sum) << "[block=" << b << "]";
  }
  EXPECT_GT(clipped, 0) << "inputs never produce a negative head dot";
}

// d_I = 37 and 5 leave a tail past the dot's last full group of 8 lanes.
TEST(SelectScores, MatchesPlainFormula) {
  for (int d : {128, 37, 5}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " d_I " << d);
    const int H = 4, n = 64;
    const double s = 1.0 / std::sqrt(static_cast<double>(d));
    const TensorD q = normal_tensor({H, d}, "q");
    const TensorD kc = normal_tensor({n, d}, "kc");
    std::vector<double> scores(n);
    block_scores_row(params(H, d, 8, s), q.ptr(), kc.ptr(), n, scores.data());
    for (int b = 0; b < n; ++b) {
      double sum = 0.0, abs_sum = 0.0;
      for (int h = 0; h < H; ++h) {
        double dot = 0.0;
        for (int j = 0; j < d; ++j) {
          dot += q.at(h, j) * kc.at(b, j);
          abs_sum += std::abs(q.at(h, j) * kc.at(b, j));
        }
        sum += std::max(dot, 0.0);
      }
      EXPECT_NEAR(scores[b], s * sum, tol::select_score_tol(s * abs_sum, d, H)) << "[block=" << b << "]";
    }
  }
}

TEST(SelectScores, NanDotPoisonsTheScore) {
  const int H = 2, d = 8, n = 5;
  TensorD q = integer_tensor({H, d}, "q");
  TensorD kc = integer_tensor({n, d}, "kc");
  kc.at(3, 5) = kNaN;  // std::max(0.0, NaN) would silently give 0 here
  std::vector<double> scores(n);
  block_scores_row(params(H, d, 2, 1.0), q.ptr(), kc.ptr(), n, scores.data());
  for (int b = 0; b < n; ++b) EXPECT_EQ(std::isnan(scores[b]), b == 3) << "[block=" << b << "]";

  q.at(1, 0) = kNaN;  // a broken query head poisons every block
  block_scores_row(params(H, d, 2, 1.0), q.ptr(), kc.ptr(), n, scores.data());
  for (int b = 0; b < n; ++b) EXPECT_TRUE(std::isnan(scores[b])) << "[block=" << b << "]";
}

TEST(SelectScores, ScaleOneKeepsTheRanking) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const int H = 4, d = 128, n = 300, kb = 32;
  const double s = 1.0 / std::sqrt(static_cast<double>(d));
  const TensorD q = normal_tensor({H, d}, "q");
  const TensorD kc = normal_tensor({n, d}, "kc");
  std::vector<double> scaled(n), unscaled(n);
  block_scores_row(params(H, d, kb, s), q.ptr(), kc.ptr(), n, scaled.data());
  block_scores_row(params(H, d, kb, 1.0), q.ptr(), kc.ptr(), n, unscaled.data());
  std::vector<int32_t> ids_scaled(kb), ids_unscaled(kb);
  std::vector<double> top_scaled(kb), top_unscaled(kb);
  top_k_blocks(scaled.data(), n, kb, ids_scaled.data(), top_scaled.data());
  top_k_blocks(unscaled.data(), n, kb, ids_unscaled.data(), top_unscaled.data());
  EXPECT_EQ(ids_scaled, ids_unscaled);
  // The scale is applied once to the same head sum: recorded logits differ by
  // exactly that factor.
  for (int b = 0; b < n; ++b) EXPECT_EQ(scaled[b], s * unscaled[b]) << "[block=" << b << "]";
}

// ---- canonical top-k ------------------------------------------------------------

struct TopK {
  std::vector<int32_t> ids;
  std::vector<double> scores;
  int count = 0;
};

TopK run_top_k(const std::vector<double>& scores, int64_t visible, int kb) {
  TopK out;
  out.ids.assign(kb, 12345);  // poison: every slot must be written
  out.scores.assign(kb, 6789.0);
  out.count = top_k_blocks(scores.data(), visible, kb, out.ids.data(), out.scores.data());
  return out;
}

TEST(SelectTopK, AllEqualScoresKeepTheLowestIds) {
  const TopK t = run_top_k(std::vector<double>(10, 1.5), 10, 4);
  EXPECT_EQ(t.count, 4);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(SelectTopK, DescendingWithTiesToTheLowerId) {
  const TopK t = run_top_k({1.0, 3.0, 2.0, 3.0, 3.0, 0.0, -0.0}, 7, 5);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 3, 4, 2, 0}));
  EXPECT_EQ(t.scores, (std::vector<double>{3.0, 3.0, 3.0, 2.0, 1.0}));
  // +0 and -0 compare equal, so they tie and the lower id wins.
  const TopK z = run_top_k({1.0, 3.0, 2.0, 3.0, 3.0, 0.0, -0.0}, 7, 7);
  EXPECT_EQ(z.ids[5], 5);
  EXPECT_EQ(z.ids[6], 6);
}

TEST(SelectTopK, NanRanksFirst) {
  const std::vector<double> scores = {1.0, kNaN, 5.0, kNaN, std::numeric_limits<double>::infinity()};
  const TopK t = run_top_k(scores, 5, 4);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 3, 4, 2}));
  EXPECT_TRUE(std::isnan(t.scores[0]) && std::isnan(t.scores[1]));
  EXPECT_EQ(t.scores[3], 5.0);
}

TEST(SelectTopK, NoVisibleBlockIsAllPadding) {
  const TopK t = run_top_k({2.0, 1.0}, 0, 3);
  EXPECT_EQ(t.count, 0);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(t.scores, (std::vector<double>{kNegInf, kNegInf, kNegInf}));
}

TEST(SelectTopK, BudgetAboveVisiblePadsWithMinusOne) {
  // Scores past `visible` belong to blocks not yet complete: never chosen.
  const TopK t = run_top_k({0.5, 2.0, 1.0, 99.0, 98.0}, 3, 5);
  EXPECT_EQ(t.count, 3);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{1, 2, 0, -1, -1}));
  EXPECT_EQ(t.scores, (std::vector<double>{2.0, 1.0, 0.5, kNegInf, kNegInf}));
}

// Against an independent formulation: a stable sort keeps equal scores in id
// order. Scores come from few levels so that ties are common, plus some NaN.
TEST(SelectTopK, MatchesStableSortReference) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  CounterRng rng(kSeed, "topk_scores");
  uint64_t draw = 0;
  for (int64_t visible : {1, 2, 7, 64, 513, 2000}) {
    for (int kb : {1, 3, 64, 512, 4096}) {
      SCOPED_TRACE(testing::Message() << "visible " << visible << " K_B " << kb);
      std::vector<double> scores(visible);
      for (auto& x : scores) {
        const double u = rng.uniform(draw++);
        x = u < 0.02 ? kNaN : std::floor(u * 20.0) - 5.0;
      }
      std::vector<int32_t> order(visible);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        if (std::isnan(scores[a]) || std::isnan(scores[b])) return std::isnan(scores[a]) && !std::isnan(scores[b]);
        return scores[a] > scores[b];
      });
      const TopK t = run_top_k(scores, visible, kb);
      const int k = static_cast<int>(std::min<int64_t>(visible, kb));
      ASSERT_EQ(t.count, k);
      for (int i = 0; i < kb; ++i) {
        const int32_t want = i < k ? order[i] : -1;
        ASSERT_EQ(t.ids[i], want) << "[slot=" << i << "]";
        ASSERT_TRUE(same_bits(t.scores[i], i < k ? scores[want] : kNegInf)) << "[slot=" << i << "]";
        if (i > 0 && i < k) {
          ASSERT_FALSE(block_precedes(t.scores[i], t.ids[i], t.scores[i - 1], t.ids[i - 1]))
              << "[slot=" << i << "]";
        }
      }
    }
  }
}

TEST(SelectTopK, BlockPrecedesIsTheCanonicalOrder) {
  EXPECT_TRUE(block_precedes(2.0, 5, 1.0, 0));
  EXPECT_TRUE(block_precedes(1.0, 0, 1.0, 5));
  EXPECT_FALSE(block_precedes(1.0, 5, 1.0, 5));  // irreflexive
  EXPECT_TRUE(block_precedes(kNaN, 9, std::numeric_limits<double>::infinity(), 0));
  EXPECT_FALSE(block_precedes(1.0, 0, kNaN, 9));
  EXPECT_TRUE(block_precedes(kNaN, 2, kNaN, 3));
  EXPECT_FALSE(block_precedes(kNaN, 3, kNaN, 2));
  EXPECT_TRUE(block_precedes(-0.0, 1, 0.0, 2));
}

TEST(SelectTopK, RejectsBadArguments) {
  std::vector<double> scores(4, 1.0);
  std::vector<int32_t> ids(4);
  std::vector<double> top(4);
  EXPECT_THROW(top_k_blocks(scores.data(), 4, 0, ids.data(), top.data()), InputError);
  EXPECT_THROW(top_k_blocks(scores.data(), -1, 4, ids.data(), top.data()), InputError);
}

// ---- select_rows ------------------------------------------------------------

struct RowsCase {
  int heads, dim, blocks_budget;
  int64_t rows, n_blocks;
};

// Visible counts spread over [0, n_blocks], with some zero rows.
std::vector<int32_t> random_visible(int64_t rows, int64_t n_blocks) {
  CounterRng rng(kSeed, "visible");
  std::vector<int32_t> v(rows);
  for (int64_t t = 0; t < rows; ++t) {
    const double u = rng.uniform(t);
    v[t] = u < 0.1 ? 0 : static_cast<int32_t>(std::floor(rng.uniform(rows + t) * double(n_blocks + 1)));
  }
  return v;
}

void expect_rows_match_per_row_scoring(const RowsCase& c) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed << " H_I " << c.heads << " d_I " << c.dim
                                  << " K_B " << c.blocks_budget << " rows " << c.rows);
  const SelectParams p = params(c.heads, c.dim, c.blocks_budget, 1.0 / std::sqrt(double(c.dim)));
  const TensorD q = normal_tensor({c.rows, c.heads, c.dim}, "q_index");
  const TensorD kc = normal_tensor({c.n_blocks, c.dim}, "kc");
  const std::vector<int32_t> visible = random_visible(c.rows, c.n_blocks);
  TensorI32 ids;
  TensorD top;
  select_rows(p, q, visible, 0, c.rows, kc, ids, top);
  ASSERT_EQ(ids.shape, (Shape{c.rows, c.blocks_budget}));
  ASSERT_EQ(top.shape, (Shape{c.rows, c.blocks_budget}));
  std::vector<double> scores(c.n_blocks);
  std::vector<int32_t> want_ids(c.blocks_budget);
  std::vector<double> want_top(c.blocks_budget);
  for (int64_t t = 0; t < c.rows; ++t) {
    block_scores_row(p, q.row(t), kc.ptr(), visible[t], scores.data());
    top_k_blocks(scores.data(), visible[t], c.blocks_budget, want_ids.data(), want_top.data());
    for (int i = 0; i < c.blocks_budget; ++i) {
      ASSERT_EQ(ids.at(t, i), want_ids[i]) << "[row=" << t << ", slot=" << i << "]";
      ASSERT_TRUE(same_bits(top.at(t, i), want_top[i])) << "[row=" << t << ", slot=" << i << "]";
    }
  }
}

// Rows cross tile boundaries and visible counts cross block chunks; d_I = 37
// exercises the dot's tail past the last full group of lanes.
TEST(SelectRows, BitIdenticalToPerRowScoring) {
  expect_rows_match_per_row_scoring({4, 128, 16, 150, 200});
  expect_rows_match_per_row_scoring({3, 37, 64, 70, 90});
  expect_rows_match_per_row_scoring({1, 5, 1, 9, 3});
}

TEST(SelectRows, IndependentOfThreadCount) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const SelectParams p = params(4, 64, 32, 1.0 / 8.0);
  const TensorD q = normal_tensor({300, 4, 64}, "q_index");
  const TensorD kc = normal_tensor({400, 64}, "kc");
  const std::vector<int32_t> visible = random_visible(300, 400);
  const int saved = omp_get_max_threads();
  TensorI32 ids_one, ids_many;
  TensorD top_one, top_many;
  omp_set_num_threads(1);
  select_rows(p, q, visible, 0, 300, kc, ids_one, top_one);
  omp_set_num_threads(5);
  select_rows(p, q, visible, 0, 300, kc, ids_many, top_many);
  omp_set_num_threads(saved);
  EXPECT_EQ(ids_one.data, ids_many.data);
  EXPECT_EQ(std::memcmp(top_one.ptr(), top_many.ptr(), top_one.data.size() * sizeof(double)), 0);
}

TEST(SelectRows, WritesOnlyItsRowsAndPadsInvisibleOnes) {
  const SelectParams p = params(2, 8, 3, 1.0);
  const TensorD q = normal_tensor({6, 2, 8}, "q_index");
  const TensorD kc = normal_tensor({5, 8}, "kc");
  const std::vector<int32_t> visible = {5, 0, 2, 5, 0, 1};
  TensorI32 ids({6, 3}, 777);
  TensorD top({6, 3}, 777.0);
  select_rows(p, q, visible, 1, 4, kc, ids, top);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ids.at(0, i), 777);  // outside [1, 4): untouched
    EXPECT_EQ(ids.at(4, i), 777);
    EXPECT_EQ(ids.at(1, i), -1);   // V = 0
    EXPECT_EQ(top.at(1, i), kNegInf);
  }
  EXPECT_EQ(ids.at(2, 2), -1);     // V = 2 < K_B
  EXPECT_EQ(top.at(2, 2), kNegInf);
  EXPECT_NE(ids.at(3, 2), -1);

  // Fresh outputs are allocated and pre-padded.
  TensorI32 fresh_ids;
  TensorD fresh_top;
  select_rows(p, q, visible, 2, 3, kc, fresh_ids, fresh_top);
  EXPECT_EQ(fresh_ids.shape, (Shape{6, 3}));
  EXPECT_EQ(fresh_ids.at(0, 0), -1);
  EXPECT_EQ(fresh_top.at(5, 2), kNegInf);
  EXPECT_EQ(fresh_ids.at(2, 0), ids.at(2, 0));
}

TEST(SelectRows, RejectsBadShapes) {
  const SelectParams p = params(2, 8, 3, 1.0);
  const TensorD q = normal_tensor({4, 2, 8}, "q_index");
  const TensorD kc = normal_tensor({5, 8}, "kc");
  const std::vector<int32_t> visible = {1, 5, 2, 0};
  TensorI32 ids;
  TensorD top;
  EXPECT_THROW(select_rows(p, normal_tensor({4, 3, 8}, "q"), visible, 0, 4, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, normal_tensor({4, 16}, "q"), visible, 0, 4, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, {1, 2, 3}, 0, 4, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, {1, -2, 3, 0}, 0, 4, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, visible, 0, 5, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, visible, 3, 2, kc, ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, visible, 0, 4, normal_tensor({4, 8}, "kc"), ids, top), InputError);
  EXPECT_THROW(select_rows(p, q, visible, 0, 4, normal_tensor({5, 7}, "kc"), ids, top), InputError);
  TensorI32 bad_ids({4, 2});
  EXPECT_THROW(select_rows(p, q, visible, 0, 4, kc, bad_ids, top), InputError);
  TensorD bad_top({3, 3});
  EXPECT_THROW(select_rows(p, q, visible, 0, 4, kc, ids, bad_top), InputError);
  EXPECT_THROW(select_rows(params(2, 8, 0, 1.0), q, visible, 0, 4, kc, ids, top), ConfigError);
  // Only the rows in range need compressed keys: row 3 sees nothing.
  EXPECT_NO_THROW(select_rows(p, q, visible, 3, 4, TensorD(), ids, top));
}

// ---- visibility -------------------------------------------------------------

TEST(SelectVisibility, FormulaAndEdges) {
  EXPECT_EQ(visible_blocks(-1, 100, 4), 0);  // padding row
  EXPECT_EQ(visible_blocks(2, 100, 4), 0);   // p = r - 2: group 0 incomplete
  EXPECT_EQ(visible_blocks(3, 100, 4), 1);   // p = r - 1: completes and sees block 0
  EXPECT_EQ(visible_blocks(13, 100, 4), 3);
  EXPECT_EQ(visible_blocks(11, 9, 4), 2);    // L div r caps (p + 1) div r
  EXPECT_EQ(visible_blocks(0, 1, 1), 1);     // r = 1: every earlier token is a block
  // Against the definition: block b is visible when its last token b·r + r - 1
  // is at or before p and inside the request.
  for (int r : {1, 2, 3, 4, 8})
    for (int64_t p = -1; p < 40; ++p)
      for (int64_t L = p + 1; L < p + 6; ++L) {
        int32_t count = 0;
        for (int64_t b = 0; (b + 1) * r <= L; ++b) count += p >= 0 && b * r + r - 1 <= p;
        EXPECT_EQ(visible_blocks(p, L, r), count) << "[r=" << r << ", p=" << p << ", L=" << L << "]";
      }
}

}  // namespace
}  // namespace qsa
