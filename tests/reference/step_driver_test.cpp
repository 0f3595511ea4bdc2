// The step driver's contract beyond the math: layer weights and their
// validation, bad step input, padding rows that stay inert, and results that
// do not depend on the OpenMP thread count.
#include "reference/step_driver.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/weights.hpp"
#include "tests/reference/driver_test_steps.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x57e9d41eULL;
constexpr int32_t kPagesPerReq = 4;

struct NamedWeight {
  const char* name;
  TensorD LayerWeights::*field;
};

const std::vector<NamedWeight> kWeights = {
    {"index_qk_proj", &LayerWeights::index_qk_proj}, {"index_q_norm", &LayerWeights::index_q_norm},
    {"index_k_norm", &LayerWeights::index_k_norm},   {"q_proj", &LayerWeights::q_proj},
    {"k_proj", &LayerWeights::k_proj},               {"v_proj", &LayerWeights::v_proj},
    {"q_norm", &LayerWeights::q_norm},               {"k_norm", &LayerWeights::k_norm},
    {"o_proj", &LayerWeights::o_proj}};

using test::input_error_message;

TEST(Weights, RandomWeightsHaveTheLayerShapesAndValidate) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  QsaConfig c = config_preset("tiny");
  c.indexer_heads = 3;  // distinct sizes, so a swapped dimension shows
  const LayerWeights w = random_weights(c, kSeed);
  EXPECT_NO_THROW(validate_weights(c, w));
  const int64_t hid = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const int64_t HI = c.indexer_heads, dI = c.indexer_head_dim;
  EXPECT_EQ(w.index_qk_proj.shape, (Shape{(HI + 1) * dI, hid}));
  EXPECT_EQ(w.index_q_norm.shape, (Shape{dI}));
  EXPECT_EQ(w.index_k_norm.shape, (Shape{dI}));
  EXPECT_EQ(w.q_proj.shape, (Shape{H * 2 * D, hid}));
  EXPECT_EQ(w.k_proj.shape, (Shape{G * D, hid}));
  EXPECT_EQ(w.v_proj.shape, (Shape{G * D, hid}));
  EXPECT_EQ(w.q_norm.shape, (Shape{D}));
  EXPECT_EQ(w.k_norm.shape, (Shape{D}));
  EXPECT_EQ(w.o_proj.shape, (Shape{hid, H * D}));

  const LayerWeights again = random_weights(c, kSeed), other = random_weights(c, kSeed + 1);
  for (const NamedWeight& nw : kWeights) {
    SCOPED_TRACE(nw.name);
    const TensorD& t = w.*nw.field;
    for (double x : t.data) ASSERT_EQ(round_bf16(x), x) << "not bf16-representable";
    EXPECT_EQ(t.data, (again.*nw.field).data) << "same seed, other values";
    EXPECT_NE(t.data, (other.*nw.field).data) << "another seed, same values";
  }
}

TEST(Weights, ValidateNamesAWeightOfTheWrongShape) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const QsaConfig c = config_preset("tiny");
  for (const NamedWeight& nw : kWeights) {
    LayerWeights w = random_weights(c, kSeed);
    Shape wrong = (w.*nw.field).shape;
    wrong.back() += 1;
    w.*nw.field = TensorD(wrong, 0.5);
    const std::string msg = input_error_message([&] { validate_weights(c, w); });
    EXPECT_NE(msg.find(nw.name), std::string::npos) << msg;
  }
}

TEST(Weights, ValidateNamesAWeightHoldingNanOrInf) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const QsaConfig c = config_preset("tiny");
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    for (const NamedWeight& nw : kWeights) {
      LayerWeights w = random_weights(c, kSeed);
      TensorD& t = w.*nw.field;
      t.data[t.data.size() / 2] = bad;
      const std::string msg = input_error_message([&] { validate_weights(c, w); });
      EXPECT_NE(msg.find(nw.name), std::string::npos) << msg;
      EXPECT_NE(msg.find("non-finite"), std::string::npos) << msg;
      EXPECT_THROW(StepDriver(c, w, {4, 4}), InputError) << nw.name;
    }
  }
}

TEST(StepDriverInput, RejectsBadMetadataHiddenStatesAndUnwrittenReads) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const QsaConfig c = config_preset("tiny");
  test::LocalSteps steps(c, 2, kPagesPerReq, kSeed);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());

  test::BuiltStep s = steps.next({{0, 6}});
  test::BuiltStep bad = s;
  bad.meta.query_start_loc[0] = 1;
  EXPECT_NE(input_error_message([&] { driver.run(bad.meta, bad.hidden); }).find("query_start_loc[0]"),
            std::string::npos);
  bad = s;
  bad.meta.block_table.at(0, 0) = static_cast<int32_t>(steps.geometry().num_pages);
  EXPECT_NE(input_error_message([&] { driver.run(bad.meta, bad.hidden); }).find("block_table[0, 0]"),
            std::string::npos);
  bad = s;
  bad.hidden = TensorD({s.hidden.dim(0), c.hidden_size + 1}, 0.25);
  EXPECT_NE(input_error_message([&] { driver.run(bad.meta, bad.hidden); }).find("hidden states"),
            std::string::npos);
  bad.hidden = TensorD({s.hidden.dim(0) + 1, c.hidden_size}, 0.25);
  EXPECT_THROW(driver.run(bad.meta, bad.hidden), InputError);

  // Request 1 continues at position 5 although no step wrote positions 0..4:
  // the open group 4..7 needs position 4 from the ring.
  test::LocalSteps skipped(c, 2, kPagesPerReq, kSeed);
  skipped.next({{1, 5}});  // advances the builder only; the driver never sees it
  s = skipped.next({{1, 3}});
  EXPECT_NE(input_error_message([&] { driver.run(s.meta, s.hidden); }).find("never written"), std::string::npos);
}

TEST(StepDriverInput, RejectsInvalidConfigAndGeometry) {
  QsaConfig c = config_preset("tiny");
  const LayerWeights w = random_weights(c, kSeed);
  c.budget = 18;  // not a multiple of r
  EXPECT_THROW(StepDriver(c, w, {4, 4}), ConfigError);
  EXPECT_THROW(StepDriver(config_preset("tiny"), w, {0, 4}), ConfigError);
}

// Snapshot of every cache slot's tag, for finding the slots a step touched.
struct CacheTags {
  std::vector<int64_t> kv, ring, compressed;
};

CacheTags tags_of(StepDriver& d) {
  CacheTags t;
  for (int64_t s = 0; s < d.kv_cache().num_slots(); ++s) t.kv.push_back(d.kv_cache().position_at(s));
  for (int64_t s = 0; s < d.ring().num_blocks() * d.ring().capacity(); ++s) t.ring.push_back(d.ring().position_at(s));
  for (int64_t s = 0; s < d.compressed_cache().num_rows(); ++s) t.compressed.push_back(d.compressed_cache().block_at(s));
  return t;
}

std::set<int64_t> changed(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  std::set<int64_t> out;
  for (size_t i = 0; i < before.size(); ++i)
    if (before[i] != after[i]) out.insert(static_cast<int64_t>(i));
  return out;
}

std::set<int64_t> real_slots(const std::vector<int64_t>& slots) {
  std::set<int64_t> out;
  for (int64_t s : slots)
    if (s >= 0) out.insert(s);
  return out;
}

TEST(StepDriverProperty, PaddingRowsAreInertAndTouchNoCache) {
  for (bool count_column : {false, true}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " count_column " << count_column);
    QsaConfig c = config_preset("tiny");
    c.count_column = count_column;
    const LayerWeights w = random_weights(c, kSeed);
    test::LocalSteps padded(c, 2, kPagesPerReq, kSeed), plain(c, 2, kPagesPerReq, kSeed);
    StepDriver dp(c, w, padded.geometry()), dn(c, w, plain.geometry());
    const std::vector<std::vector<test::Chunk>> batches = {{{0, 13}, {1, 8}}, {{1, 1}, {0, 3}}, {{0, 1}, {1, 1}}};
    for (const auto& batch : batches) {
      const test::BuiltStep sp = padded.next(batch, /*padding=*/3), sn = plain.next(batch);
      const CacheTags before = tags_of(dp);
      const StepOutputs o = dp.run(sp.meta, sp.hidden);
      const StepOutputs on = dn.run(sn.meta, sn.hidden);
      const StepLayout& l = o.layout;
      const CacheTags after = tags_of(dp);
      EXPECT_EQ(changed(before.kv, after.kv), real_slots(l.main_slot));
      EXPECT_EQ(changed(before.ring, after.ring), real_slots(l.ring_slot));
      EXPECT_EQ(changed(before.compressed, after.compressed), real_slots(l.compressed_slot));

      ASSERT_EQ(l.num_tokens, l.num_valid_tokens + 3);
      for (int64_t t = l.num_valid_tokens; t < l.num_tokens; ++t) {
        SCOPED_TRACE(testing::Message() << "padding row " << t);
        for (const TensorD* x : {&o.index_q, &o.raw_keys, &o.q, &o.k, &o.v, &o.gate, &o.attn, &o.gated, &o.out}) {
          const int64_t width = x->numel() / x->dim(0);
          for (int64_t j = 0; j < width; ++j) ASSERT_EQ(x->row(t)[j], 0.0) << "column " << j;
        }
        for (int64_t j = 0; j < o.block_ids.dim(1); ++j) {
          EXPECT_EQ(o.block_ids.at(t, j), -1);
          EXPECT_EQ(o.block_scores.at(t, j), -std::numeric_limits<double>::infinity());
        }
        const int64_t width = o.token_idx.dim(1);
        for (int64_t j = 0; j < width; ++j)
          EXPECT_EQ(o.token_idx.at(t, j), count_column && j + 1 == width ? 0 : -1) << "column " << j;
      }
      // Real rows do not see the padding at all.
      for (const auto& [x, y] : std::vector<std::pair<const TensorD*, const TensorD*>>{
               {&o.index_q, &on.index_q}, {&o.q, &on.q}, {&o.attn, &on.attn}, {&o.out, &on.out}}) {
        const int64_t width = x->numel() / x->dim(0);
        for (int64_t i = 0; i < l.num_valid_tokens * width; ++i) ASSERT_EQ(x->data[static_cast<size_t>(i)], y->data[static_cast<size_t>(i)]);
      }
    }
  }
}

// Every output of a step and the final cache contents, flattened.
std::vector<std::vector<double>> flatten(const StepOutputs& o) {
  auto f = [](const auto& t) { return std::vector<double>(t.data.begin(), t.data.end()); };
  return {f(o.index_q), f(o.raw_keys), f(o.compressed.keys), f(o.block_ids), f(o.block_scores), f(o.token_idx),
          f(o.q), f(o.k), f(o.v), f(o.gate), f(o.attn), f(o.gated), f(o.out)};
}

std::vector<std::vector<double>> run_sequence(PrecisionProfile profile, int threads) {
  omp_set_num_threads(threads);
  QsaConfig c = config_preset("tiny");
  apply_profile(c, profile);
  c.speculative_tokens = 1;
  c.count_column = true;
  test::LocalSteps steps(c, 3, kPagesPerReq, kSeed, /*mrope=*/true);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
  std::vector<std::vector<double>> all;
  const std::vector<std::pair<std::vector<test::Chunk>, bool>> plan = {
      {{{0, 30}, {1, 7}}, false},          {{{1, 26}, {2, 41}}, false},  {{{2, 1}, {0, 1}, {1, 1}}, false},
      {{{0, 1}, {1, 1}, {2, 1}}, true},    {{{0, 5}, {2, 1}}, false},    {{{1, 1}, {0, 1}}, false}};
  for (const auto& [batch, mtp] : plan) {
    const test::BuiltStep s = steps.next(batch, /*padding=*/2, mtp);
    for (auto& v : flatten(driver.run(s.meta, s.hidden))) all.push_back(std::move(v));
  }
  std::vector<double> kv;
  for (int64_t slot = 0; slot < driver.kv_cache().num_slots(); ++slot)
    for (int g = 0; g < c.num_kv_heads; ++g)
      for (int d = 0; d < c.head_dim; ++d) {
        kv.push_back(driver.kv_cache().k(slot, g)[d]);
        kv.push_back(driver.kv_cache().v(slot, g)[d]);
      }
  all.push_back(std::move(kv));
  return all;
}

// Restores the OpenMP thread count however the test leaves.
struct ThreadCountGuard {
  int saved = omp_get_max_threads();
  ~ThreadCountGuard() { omp_set_num_threads(saved); }
};

TEST(StepDriverProperty, ThreadCountChangesNoBit) {
  const ThreadCountGuard guard;
  for (PrecisionProfile profile : {PrecisionProfile::kExact, PrecisionProfile::kEngine}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile));
    const auto one = run_sequence(profile, 1);
    for (int threads : {2, 3}) {
      const auto many = run_sequence(profile, threads);
      ASSERT_EQ(one.size(), many.size());
      for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], many[i]) << "tensor " << i << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace qsa
