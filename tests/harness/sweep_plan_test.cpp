// Sweep inputs and their validation: row specs, axes, which points and rows a
// plan holds, the policies' block orders and the aggregate statistics.
#include "harness/sweep/sweep_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "harness/gen/generator.hpp"
#include "harness/sweep/sweep_policies.hpp"
#include "harness/sweep/sweep_table.hpp"

namespace qsa {
namespace {

constexpr uint64_t kGenSeed = 4242;

SweepTrace tiny_trace() {
  GenOptions g;
  g.seed = kGenSeed;
  g.prompt_lens = {33, 20};
  g.chunk = 12;
  g.decode_steps = 2;
  g.mtp_drafts = 2;
  g.inputs_only = true;
  return {"data/x,y.h5", "test", generate_trace(config_preset("tiny"), g)};
}

SweepSettings settings(const std::string& rows = "all") {
  SweepSettings s;
  s.axes.budgets = {8, 12, 16};
  s.axes.ratios = {2, 4, 32};
  s.axes.kv_dtypes = {KvDtype::kBf16};
  s.axes.indexer_dtypes = {IndexerDtype::kBf16};
  s.axes.policies = all_sweep_policies();
  s.rows = parse_row_spec(rows);
  canonicalize_sweep_settings(s);
  return s;
}

TEST(SweepSettings, RowSpecsParseAndPrintCanonically) {
  EXPECT_EQ(to_string(parse_row_spec("all")), "all");
  EXPECT_EQ(to_string(parse_row_spec("every:5")), "every:5");
  EXPECT_EQ(to_string(parse_row_spec("fractions:1,0.25,0.5,0.25")), "fractions:0.25,0.5,1");
  for (const char* bad : {"every:0", "every:", "every:2x", "fractions:", "fractions:1.5", "fractions:a", "some", ""})
    EXPECT_THROW(parse_row_spec(bad), ConfigError) << bad;
}

TEST(SweepSettings, BadAxesAreRejected) {
  auto with = [](auto change) {
    SweepSettings s = settings();
    change(s);
    return s;
  };
  SweepSettings empty;
  EXPECT_THROW(canonicalize_sweep_settings(empty), ConfigError);
  SweepSettings zero = with([](SweepSettings& s) { s.axes.budgets = {0, 16}; });
  EXPECT_THROW(canonicalize_sweep_settings(zero), ConfigError);
  SweepSettings dup = with([](SweepSettings& s) { s.axes.policies.push_back(SweepPolicy::kRandom); });
  EXPECT_THROW(canonicalize_sweep_settings(dup), ConfigError);
  SweepSettings sorted = with([](SweepSettings& s) { s.axes.ratios = {8, 1, 4}; });
  canonicalize_sweep_settings(sorted);
  EXPECT_EQ(sorted.axes.ratios, (std::vector<int>{1, 4, 8}));
  EXPECT_THROW(parse_sweep_policy("oracle"), ConfigError);
}

TEST(SweepPlan, SkipsImpossibleCombinationsWithANote) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed));
  const SweepPlan plan = plan_sweep({tiny_trace()}, settings());
  ASSERT_EQ(plan.points.size(), 2u);  // ratio 32 does not divide the page size 16
  EXPECT_EQ(plan.points[0].ratio, 2);
  EXPECT_EQ(plan.points[0].budgets, (std::vector<int>{8, 12, 16}));
  EXPECT_EQ(plan.points[1].budgets, (std::vector<int>{8, 12, 16}));
  ASSERT_EQ(plan.notes.size(), 1u);
  EXPECT_NE(plan.notes[0].find("ratio 32"), std::string::npos) << plan.notes[0];
  SweepSettings s = settings();
  s.axes.ratios = {8};
  const SweepPlan eight = plan_sweep({tiny_trace()}, s);
  EXPECT_EQ(eight.points[0].budgets, (std::vector<int>{8, 16}));
  EXPECT_NE(eight.notes[0].find("budgets 12 skipped"), std::string::npos) << eight.notes[0];
  const QsaConfig c = point_config(tiny_trace().trace.config, eight.points[0]);
  EXPECT_EQ(c.budget, 16);
  EXPECT_EQ(c.profile, PrecisionProfile::kExact);
}

TEST(SweepPlan, ImpossibleSweepsFailNamingTheTrace) {
  SweepSettings s = settings();
  s.axes.ratios = {32};
  EXPECT_THROW(plan_sweep({tiny_trace()}, s), ConfigError);
  SweepSettings octave = settings();
  octave.axes.kv_dtypes = {KvDtype::kOctaveK3V4};
  try {
    plan_sweep({tiny_trace()}, octave);
    FAIL() << "Octave accepted head_dim 32";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim 32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("data/x,y.h5"), std::string::npos) << e.what();
  }
}

TEST(SweepPlan, RowsAreRealSelectingRowsThatSeeABlockAtTheLargestRatio) {
  const SweepTrace t = tiny_trace();
  const SweepPlan all = plan_sweep({t}, settings());
  const SweepPlan every = plan_sweep({t}, settings("every:4"));
  ASSERT_FALSE(all.rows[0].empty());
  for (const ScoredRow& r : all.rows[0]) {
    EXPECT_GE(r.pos + 1, 4);  // the largest valid ratio
    EXPECT_FALSE(t.trace.steps[static_cast<size_t>(r.step)].meta.mtp_reuse);
  }
  EXPECT_EQ(every.rows[0].size(), (all.rows[0].size() + 3) / 4);
  EXPECT_EQ(every.rows[0][1].row, all.rows[0][4].row);
  EXPECT_EQ(every.rows[0][1].step, all.rows[0][4].step);
  // Fractions 0 and 1: each request's first eligible row (p = 3) and its
  // last selecting row: the MTP draft 0 row (final lengths 37 and 24; the
  // last token is an MTP reuse row, never scored).
  const SweepPlan ends = plan_sweep({t}, settings("fractions:0,1"));
  std::set<int64_t> pos;
  for (const ScoredRow& r : ends.rows[0]) pos.insert(r.pos);
  EXPECT_EQ(pos, (std::set<int64_t>{3, 22, 35}));
  for (const ScoredRow& r : ends.rows[0]) EXPECT_EQ(r.bucket, r.pos == 3 ? 0 : 3);
}

TEST(SweepPolicies, OrdersArePrefixesOfOneRanking) {
  EXPECT_EQ(window_order(10, 2, 4, 5), (std::vector<int32_t>{0, 1, 9, 8, 7}));
  EXPECT_EQ(window_order(10, 4, 4, 3), (std::vector<int32_t>{0, 9, 8}));
  EXPECT_EQ(window_order(2, 4, 0, 5), (std::vector<int32_t>{1, 0}));
  const CounterRng rng(kGenSeed, "sweep-policy-test");
  const std::vector<int32_t> r6 = random_order(20, 6, rng), r3 = random_order(20, 3, rng);
  EXPECT_TRUE(std::equal(r3.begin(), r3.end(), r6.begin()));
  EXPECT_EQ(std::set<int32_t>(r6.begin(), r6.end()).size(), 6u);
  for (int32_t b : r6) EXPECT_LT(b, 20);
  // Two heads over 3 blocks of 2 tokens: block 2 holds the largest single
  // probability, block 1 the largest sum.
  const double probs[] = {0.05, 0.05, 0.3, 0.3, 0.0, 0.3, 0.05, 0.05, 0.3, 0.3, 0.0, 0.3};
  EXPECT_EQ(oracle_order(probs, 2, 6, 2, 3, true, 3), (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(oracle_order(probs, 2, 6, 2, 3, false, 2), (std::vector<int32_t>{1, 2}));
  const int32_t ids[] = {4, 1, -1, -1};
  EXPECT_EQ(indexer_order(ids, 4, 3), (std::vector<int32_t>{4, 1}));
}

TEST(SweepTable, StatisticsAndCsvRoundTrip) {
  const SweepStats s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.n, 5);
  EXPECT_EQ(s.mean, 3.0);
  EXPECT_EQ(s.median, 3.0);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.p5, 1.2);  // numpy.percentile([1..5], 5)
  EXPECT_DOUBLE_EQ(s.p95, 4.8);
  EXPECT_TRUE(std::isnan(summarize({1, std::nan("")}).mean));
  EXPECT_EQ(percentile({1, INFINITY, INFINITY}, 0.9), INFINITY);
  EXPECT_EQ(csv_number(0.1), "0.1");
  EXPECT_EQ(csv_number(-INFINITY), "-inf");
  EXPECT_EQ(parse_csv_line(csv_field("a,\"b\"") + ",c"), (std::vector<std::string>{"a,\"b\"", "c"}));
}

}  // namespace
}  // namespace qsa
