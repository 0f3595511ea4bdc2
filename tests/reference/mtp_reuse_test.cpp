// MTP top-k reuse (spec section 9): draft step 0 selects and saves each
// request's last-token row; later draft steps attend through those rows, so a
// draft token never attends to itself, while every cache write still happens.
#include "reference/mtp_reuse.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/step_driver.hpp"
#include "reference/weights.hpp"
#include "tests/reference/driver_test_steps.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x3e7a5eedULL;
constexpr int32_t kPagesPerReq = 2;

QsaConfig mtp_config(bool count_column) {
  QsaConfig c = config_preset("tiny");
  c.speculative_tokens = 1;
  c.count_column = count_column;
  return c;
}

template <class T>
std::vector<T> row_of(const Tensor<T>& x, int64_t row) {
  const int64_t w = x.numel() / x.dim(0);
  return std::vector<T>(x.row(row), x.row(row) + w);
}

// Valid ids of a token-index row: the prefix before the count, or every id >= 0.
std::vector<int32_t> valid_ids(const TensorI32& idx, int64_t row, bool count_column) {
  const std::vector<int32_t> all = row_of(idx, row);
  const size_t n = count_column ? static_cast<size_t>(all.back()) : all.size();
  std::vector<int32_t> ids;
  for (size_t c = 0; c < n; ++c)
    if (all[c] >= 0) ids.push_back(all[c]);
  return ids;
}

bool contains(const std::vector<int32_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Request 0 prefills 21 tokens, request 1 prefills 14; draft steps then add
// one token to each. Draft step 1 puts request 1 at p = 15, which completes
// block 3; request 0 at p = 22 completes nothing.
TEST(MtpReuse, DraftStepsReuseStepZeroRowsAndStillWriteCaches) {
  for (bool count_column : {false, true}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " count_column " << count_column);
    const QsaConfig c = mtp_config(count_column);
    test::LocalSteps steps(c, 2, kPagesPerReq, kSeed);
    StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
    const int r = c.compress_ratio;

    test::BuiltStep s = steps.next({{0, 21}, {1, 14}});
    driver.run(s.meta, s.hidden);
    s = steps.next({{0, 1}, {1, 1}});
    const StepOutputs d0 = driver.run(s.meta, s.hidden);
    ASSERT_EQ(d0.layout.pos, (std::vector<int64_t>{21, 14}));
    for (int64_t t = 0; t < 2; ++t)  // a selecting step's row includes its own token (an open tail)
      EXPECT_TRUE(contains(valid_ids(d0.token_idx, t, count_column), d0.layout.pos[static_cast<size_t>(t)]));
    const MtpRows saved = driver.mtp_rows();
    ASSERT_TRUE(saved.valid());

    for (int draft = 1; draft <= 2; ++draft) {
      SCOPED_TRACE(testing::Message() << "draft step " << draft);
      s = steps.next({{0, 1}, {1, 1}}, /*padding=*/1, /*mtp_reuse=*/true);
      const StepOutputs d = driver.run(s.meta, s.hidden);
      const StepLayout& l = d.layout;
      for (int64_t t = 0; t < 2; ++t) {
        SCOPED_TRACE(testing::Message() << "request " << t << " position " << l.pos[static_cast<size_t>(t)]);
        EXPECT_EQ(row_of(d.block_ids, t), row_of(d0.block_ids, t));
        EXPECT_EQ(row_of(d.block_scores, t), row_of(d0.block_scores, t));
        EXPECT_EQ(row_of(d.token_idx, t), row_of(d0.token_idx, t));
        EXPECT_FALSE(contains(valid_ids(d.token_idx, t, count_column), l.pos[static_cast<size_t>(t)]))
            << "a draft token attends to itself";

        // Cache writes still happen: main K/V, the ring.
        EXPECT_EQ(driver.kv_cache().position_at(l.main_slot[static_cast<size_t>(t)]), l.pos[static_cast<size_t>(t)]);
        const int64_t ring_slot = l.ring_slot[static_cast<size_t>(t)];
        ASSERT_GE(ring_slot, 0);
        EXPECT_EQ(driver.ring().position_at(ring_slot), l.pos[static_cast<size_t>(t)]);
        EXPECT_EQ(row_of(d.raw_keys, t),
                  std::vector<double>(driver.ring().key_at(ring_slot),
                                      driver.ring().key_at(ring_slot) + c.indexer_head_dim));
      }
      // The padding row: all -1, count 0.
      const std::vector<int32_t> pad = row_of(d.token_idx, 2);
      for (size_t col = 0; col < pad.size(); ++col)
        EXPECT_EQ(pad[col], count_column && col + 1 == pad.size() ? 0 : -1) << "padding column " << col;
      EXPECT_EQ(row_of(d.block_ids, 2), std::vector<int32_t>(static_cast<size_t>(c.blocks_budget()), -1));

      if (draft == 1) {  // request 1 at p = 15 completes block 3
        ASSERT_EQ((l.pos[1] + 1) % r, 0);
        ASSERT_NE((l.pos[0] + 1) % r, 0);
        ASSERT_EQ(d.compressed.block, std::vector<int64_t>{l.pos[1] / r});
        EXPECT_EQ(d.compressed.token, std::vector<int32_t>{1});
        const int64_t slot = d.compressed.slot[0];
        EXPECT_EQ(slot, l.compressed_slot[1]);
        EXPECT_EQ(driver.compressed_cache().block_at(slot), l.pos[1] / r);
        EXPECT_EQ(row_of(d.compressed.keys, 0),
                  std::vector<double>(driver.compressed_cache().row(slot),
                                      driver.compressed_cache().row(slot) + c.indexer_head_dim));
      }
      // A reuse step leaves the saved rows alone.
      EXPECT_EQ(driver.mtp_rows().token_idx.data, saved.token_idx.data);
    }
  }
}

TEST(MtpReuse, ReuseBeforeAnySelectingStepThrows) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const QsaConfig c = mtp_config(false);
  test::LocalSteps steps(c, 2, kPagesPerReq, kSeed);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
  const test::BuiltStep s = steps.next({{0, 5}}, 0, /*mtp_reuse=*/true);
  try {
    driver.run(s.meta, s.hidden);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("before any selecting step"), std::string::npos) << e.what();
  }
}

TEST(MtpReuse, ReuseStepWithMoreRequestsThanSavedThrows) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const QsaConfig c = mtp_config(false);
  test::LocalSteps steps(c, 2, kPagesPerReq, kSeed);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
  test::BuiltStep s = steps.next({{0, 9}});
  driver.run(s.meta, s.hidden);
  s = steps.next({{0, 1}, {1, 1}}, 0, /*mtp_reuse=*/true);
  EXPECT_THROW(driver.run(s.meta, s.hidden), InputError);
}

// save/reuse on hand-made rows: the last row of each request is saved, and
// each token of request i gets saved row i.
TEST(MtpReuse, SaveTakesLastRowsAndReuseCopiesThemPerRequest) {
  const QsaConfig c = config_preset("tiny");
  const CacheGeometry g{4, 4};
  const StepLayout sel = derive_step_layout(c, g, simple_step({0, 0}, {2, 3}, 2));
  const int kb = 2, width = 3;
  TensorI32 ids({5, kb}), idx({5, width});
  TensorD scores({5, kb});
  for (int64_t t = 0; t < 5; ++t) {
    for (int j = 0; j < kb; ++j) {
      ids.at(t, j) = static_cast<int32_t>(10 * t + j);
      scores.at(t, j) = 0.5 * static_cast<double>(t) + j;
    }
    for (int j = 0; j < width; ++j) idx.at(t, j) = static_cast<int32_t>(100 * t + j);
  }
  const MtpRows saved = save_mtp_rows(sel, ids, scores, idx);
  ASSERT_TRUE(saved.valid());
  EXPECT_EQ(row_of(saved.block_ids, 0), row_of(ids, 1));
  EXPECT_EQ(row_of(saved.block_ids, 1), row_of(ids, 4));
  EXPECT_EQ(row_of(saved.block_scores, 1), row_of(scores, 4));
  EXPECT_EQ(row_of(saved.token_idx, 0), row_of(idx, 1));

  // Two tokens of request 0, one of request 1, one padding row.
  const StepLayout reuse = derive_step_layout(c, g, simple_step({2, 3}, {2, 1}, 2, 1));
  TensorI32 out_ids, out_idx;
  TensorD out_scores;
  reuse_mtp_rows(reuse, saved, /*count_column=*/true, out_ids, out_scores, out_idx);
  EXPECT_EQ(row_of(out_ids, 0), row_of(ids, 1));
  EXPECT_EQ(row_of(out_ids, 1), row_of(ids, 1));
  EXPECT_EQ(row_of(out_idx, 2), row_of(idx, 4));
  EXPECT_EQ(row_of(out_ids, 3), std::vector<int32_t>(kb, -1));
  EXPECT_EQ(row_of(out_scores, 3), std::vector<double>(kb, -std::numeric_limits<double>::infinity()));
  EXPECT_EQ(row_of(out_idx, 3), (std::vector<int32_t>{-1, -1, 0}));

  EXPECT_THROW(reuse_mtp_rows(reuse, MtpRows{}, false, out_ids, out_scores, out_idx), InputError);
}

}  // namespace
}  // namespace qsa
