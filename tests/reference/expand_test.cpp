// Expansion of selected blocks to token ids (spec section 6): worked examples
// by hand, the tail edge cases, the count column, padding rows, r = 1, the
// row invariants on random selections, and bad input.
#include "reference/expand.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/select.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0xe8a9dULL;

ExpandParams params(int ratio, int budget, bool count_column) {
  ExpandParams p;
  p.ratio = ratio;
  p.budget = budget;
  p.count_column = count_column;
  return p;
}

std::vector<int32_t> expand(const ExpandParams& p, std::vector<int32_t> blocks, int64_t pos) {
  std::vector<int32_t> out(p.width(), 4242);  // poison: every column must be written
  expand_row(p, blocks.data(), static_cast<int>(blocks.size()), pos, out.data());
  return out;
}

using Row = std::vector<int32_t>;

// r = 4, K = 8 (K_B = 2), p = 13: V = 14 div 4 = 3, blocks [2, 0] win;
// n_exp = 8, t_start = 12, n_tail = 2, W = 8 + 3 = 11.
TEST(ExpandRow, SpecWorkedExample) {
  EXPECT_EQ(expand(params(4, 8, false), {2, 0}, 13), (Row{8, 9, 10, 11, 0, 1, 2, 3, 12, 13, -1}));
  // The count column is the 12th: n_exp + n_tail = 10.
  EXPECT_EQ(expand(params(4, 8, true), {2, 0}, 13), (Row{8, 9, 10, 11, 0, 1, 2, 3, 12, 13, -1, 10}));
}

TEST(ExpandRow, NoCompleteBlockAttendsToTheTailOnly) {
  // p = r - 2: V = 0, the tail is tokens 0 .. p.
  EXPECT_EQ(expand(params(4, 8, true), {-1, -1}, 2), (Row{0, 1, 2, -1, -1, -1, -1, -1, -1, -1, -1, 3}));
  // The very first token attends to itself.
  EXPECT_EQ(expand(params(4, 8, true), {-1, -1}, 0), (Row{0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1}));
}

TEST(ExpandRow, CompletingTokenHasAnEmptyTail) {
  // p = r - 1: V = 1 and n_tail = 0; block 0 (which holds p itself) always wins.
  EXPECT_EQ(expand(params(4, 8, true), {0, -1}, 3), (Row{0, 1, 2, 3, -1, -1, -1, -1, -1, -1, -1, 4}));
  // (p + 1) mod r == 0 later on: the query sees itself only if its own block won.
  const Row without_own = expand(params(4, 8, true), {0, 1}, 11);
  EXPECT_EQ(without_own, (Row{0, 1, 2, 3, 4, 5, 6, 7, -1, -1, -1, 8}));
  EXPECT_EQ(std::count(without_own.begin(), without_own.end() - 1, 11), 0);
  EXPECT_EQ(expand(params(4, 8, true), {2, 0}, 11), (Row{8, 9, 10, 11, 0, 1, 2, 3, -1, -1, -1, 8}));
}

TEST(ExpandRow, FewerVisibleBlocksThanBudget) {
  // r = 4, K = 16 (K_B = 4), p = 9: V = 2, so two slots are -1.
  EXPECT_EQ(expand(params(4, 16, false), {1, 0, -1, -1}, 9),
            (Row{4, 5, 6, 7, 0, 1, 2, 3, 8, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  // Ids after the first -1 are not part of the prefix and are ignored.
  EXPECT_EQ(expand(params(4, 16, false), {1, -1, 0, -1}, 9),
            (Row{4, 5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
}

TEST(ExpandRow, CountColumnChangesOnlyTheWidth) {
  const Row plain = expand(params(4, 8, false), {1, 0}, 9);
  const Row packed = expand(params(4, 8, true), {1, 0}, 9);
  EXPECT_EQ(params(4, 8, false).width(), 11);
  EXPECT_EQ(params(4, 8, true).width(), 12);
  EXPECT_EQ(Row(packed.begin(), packed.end() - 1), plain);
  EXPECT_EQ(packed.back(), 10);
}

TEST(ExpandRow, PaddingRowIsInert) {
  EXPECT_EQ(expand(params(4, 8, true), {-1, -1}, -1), (Row{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0}));
  EXPECT_EQ(expand(params(4, 8, false), {-1, -1}, -1), Row(11, -1));
  // Whatever sits in a padding row's block slots is not read.
  EXPECT_EQ(expand(params(4, 8, false), {7, 3}, -1), Row(11, -1));
}

TEST(ExpandRow, RatioOneIsTokenLevel) {
  // r = 1: W = K, every block is a token, the tail is always empty.
  EXPECT_EQ(params(1, 4, false).width(), 4);
  EXPECT_EQ(expand(params(1, 4, true), {7, 2, 9, 0}, 9), (Row{7, 2, 9, 0, 4}));
  EXPECT_EQ(expand(params(1, 4, true), {1, 0, -1, -1}, 1), (Row{1, 0, -1, -1, 2}));
}

TEST(ExpandRow, RejectsBadInput) {
  std::vector<int32_t> out(64);
  const int32_t unfinished[] = {3, 0};  // block 3 completes at p = 15
  EXPECT_THROW(expand_row(params(4, 8, false), unfinished, 2, 14, out.data()), InputError);
  const int32_t corrupt[] = {-5, 0};
  EXPECT_THROW(expand_row(params(4, 8, false), corrupt, 2, 14, out.data()), InputError);
  const int32_t ok[] = {1, 0, -1};
  EXPECT_THROW(expand_row(params(4, 8, false), ok, 3, 14, out.data()), InputError);  // 3 > K / r
  EXPECT_THROW(expand_row(params(4, 10, false), ok, 2, 14, out.data()), ConfigError);  // K % r != 0
  EXPECT_THROW(expand_row(params(0, 8, false), ok, 2, 14, out.data()), ConfigError);

  TensorI32 ids({3, 2}, -1);
  TensorI32 token_idx;
  EXPECT_THROW(expand_rows(params(4, 8, false), ids, {1, 2}, token_idx), InputError);
  EXPECT_THROW(expand_rows(params(4, 12, false), ids, {1, 2, 3}, token_idx), InputError);
  TensorI32 wrong_width({3, 12});
  EXPECT_THROW(expand_rows(params(4, 8, false), ids, {1, 2, 3}, wrong_width), InputError);
  ids.at(1, 0) = 1;  // position 2 has no complete block
  EXPECT_THROW(expand_rows(params(4, 8, false), ids, {5, 2, 3}, token_idx), InputError);
}

// ---- select then expand over whole requests --------------------------------

struct Case {
  int ratio, budget;
  bool count_column;
  int64_t context, chunk;
};

// Selects on random scores for every row of a request chunk, expands, and
// checks each row against the invariants consumers rely on.
void check_request(const Case& c) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed << " r " << c.ratio << " K " << c.budget
                                  << " count " << c.count_column << " context " << c.context
                                  << " chunk " << c.chunk);
  const int r = c.ratio, kb = c.budget / c.ratio;
  const int64_t L = c.context + c.chunk, padding = 2, T = c.chunk + padding;
  const int64_t n_blocks = L / r;
  CounterRng rng(kSeed, "scores");
  std::vector<double> scores(n_blocks);
  for (int64_t b = 0; b < n_blocks; ++b) scores[b] = std::floor(rng.normal(b) * 4.0);  // ties
  TensorI32 block_ids({T, kb}, -1);
  TensorD top({T, kb});
  std::vector<int64_t> pos(T, -1);
  for (int64_t t = 0; t < c.chunk; ++t) {
    pos[t] = c.context + t;
    top_k_blocks(scores.data(), visible_blocks(pos[t], L, r), kb, block_ids.row(t), top.row(t));
  }
  const ExpandParams p = params(r, c.budget, c.count_column);
  TensorI32 token_idx;
  expand_rows(p, block_ids, pos, token_idx);
  ASSERT_EQ(token_idx.shape, (Shape{T, p.width()}));
  const int W = c.budget + r - 1;
  for (int64_t t = 0; t < T; ++t) {
    SCOPED_TRACE(testing::Message() << "row " << t << " p " << pos[t]);
    std::vector<int32_t> single(p.width());
    expand_row(p, block_ids.row(t), kb, pos[t], single.data());
    ASSERT_EQ(std::vector<int32_t>(token_idx.row(t), token_idx.row(t) + p.width()), single);
    int n = 0;
    while (n < W && single[n] >= 0) ++n;
    for (int col = n; col < W; ++col) ASSERT_EQ(single[col], -1) << "[col=" << col << "]";
    if (c.count_column) {
      ASSERT_EQ(single[W], n);
    }
    if (pos[t] < 0) {
      ASSERT_EQ(n, 0);
      continue;
    }
    const int64_t v = visible_blocks(pos[t], L, r);
    const int64_t t_start = (pos[t] + 1) / r * r;
    ASSERT_EQ(n, std::min<int64_t>(v, kb) * r + (pos[t] + 1 - t_start));
    std::set<int32_t> seen(single.begin(), single.begin() + n);
    ASSERT_EQ(static_cast<int>(seen.size()), n) << "duplicate token ids";
    ASSERT_LE(*seen.rbegin(), pos[t]) << "a token after the query";
    for (int64_t tok = t_start; tok <= pos[t]; ++tok) ASSERT_EQ(seen.count(static_cast<int32_t>(tok)), 1u);
    // Selected tokens come in whole blocks, in selection order.
    for (int col = 0; col < n - (pos[t] + 1 - t_start); ++col)
      ASSERT_EQ(single[col], block_ids.at(t, col / r) * r + col % r) << "[col=" << col << "]";
  }
}

TEST(ExpandRows, SelectedRequestsKeepTheRowContract) {
  check_request({4, 16, false, 0, 37});  // prefill from scratch: V grows from 0
  check_request({4, 16, true, 50, 9});   // chunk after context, every tail length
  check_request({1, 8, true, 3, 20});    // token-level top-k
  check_request({8, 32, true, 100, 17}); // ratio 8
  check_request({3, 6, false, 1, 12});   // odd ratio
}

}  // namespace
}  // namespace qsa
