// Properties every sweep must have (issue 5): a budget covering the context
// recalls all mass and leaves only the KV dtype's error; the mass-optimal
// oracle is never beaten; recall never falls as the budget grows; results do
// not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "harness/gen/generator.hpp"
#include "harness/sweep/sweep_plan.hpp"
#include "harness/sweep/sweep_point.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kGenSeed = 314;
constexpr uint64_t kSweepSeed = 2718;

// Prompts of 41 and 29 tokens in chunks of 16 (groups straddle chunks),
// decodes and an MTP pair: the largest context is 46 tokens, so the budget
// 48 covers every row.
SweepTrace tiny_trace() {
  GenOptions g;
  g.seed = kGenSeed;
  g.prompt_lens = {41, 29};
  g.chunk = 16;
  g.decode_steps = 3;
  g.mtp_drafts = 2;
  g.inputs_only = true;
  return {"gen:test", "test", generate_trace(config_preset("tiny"), g)};
}

constexpr int kFullBudget = 48;

SweepSettings settings() {
  SweepSettings s;
  s.axes.budgets = {8, 16, 24, kFullBudget};
  s.axes.ratios = {2, 4, 8};
  s.axes.kv_dtypes = {KvDtype::kBf16, KvDtype::kFp8};
  s.axes.indexer_dtypes = {IndexerDtype::kBf16};
  s.axes.policies = all_sweep_policies();
  s.seed = kSweepSeed;
  canonicalize_sweep_settings(s);
  return s;
}

size_t series(const PointValues& v, const std::string& policy, int budget, const std::string& kv,
              const std::string& metric) {
  for (size_t s = 0; s < v.series.size(); ++s) {
    const SeriesKey& k = v.series[s];
    if (k.policy == policy && k.budget == budget && k.kv_dtype == kv && k.metric == metric) return s;
  }
  ADD_FAILURE() << "no series " << policy << " " << budget << " " << kv << " " << metric;
  return 0;
}

struct Fixture {
  SweepTrace trace = tiny_trace();
  SweepSettings s = settings();
  SweepPlan plan = plan_sweep({trace}, s);
  std::vector<PointValues> points;
  Fixture() {
    for (const SweepPoint& p : plan.points) points.push_back(run_sweep_point(trace, p, plan.rows[0], s));
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

TEST(SweepProperty, BudgetCoveringTheContextRecallsEverythingAndLeavesOnlyKvError) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed) + ", sweep seed " + std::to_string(kSweepSeed));
  const Fixture& f = fixture();
  const auto& rows = f.plan.rows[0];
  ASSERT_FALSE(rows.empty());
  for (size_t i = 0; i < f.points.size(); ++i) {
    const PointValues& v = f.points[i];
    SCOPED_TRACE("ratio " + std::to_string(f.plan.points[i].ratio));
    for (SweepPolicy pol : f.s.axes.policies) {
      const std::string p = to_string(pol);
      const size_t mass = series(v, p, kFullBudget, "exact", "mass_recall");
      const size_t attn = series(v, p, kFullBudget, "exact", "attn_err_sparsity");
      const size_t out = series(v, p, kFullBudget, "exact", "out_err_sparsity");
      for (size_t r = 0; r < rows.size(); ++r) {
        ASSERT_LE(rows[r].pos + 1, kFullBudget);
        EXPECT_EQ(v.values[out][r], 0.0) << p << " row " << r;
        for (int h = 0; h < v.heads; ++h) {
          const size_t at = r * static_cast<size_t>(v.heads) + static_cast<size_t>(h);
          EXPECT_NEAR(v.values[mass][at], 1.0, tol::sweep_full_mass_tol(static_cast<double>(rows[r].pos + 1)))
              << p << " row " << r << " head " << h;
          EXPECT_EQ(v.values[attn][at], 0.0) << p << " row " << r << " head " << h;
        }
      }
      for (KvDtype d : f.s.axes.kv_dtypes) {
        const std::string kv = to_string(d);
        // Sparse over every token runs the dense loop: bit for bit the same.
        EXPECT_EQ(v.values[series(v, p, kFullBudget, kv, "attn_err_both")],
                  v.values[series(v, "dense", 0, kv, "attn_err_kv")]);
        EXPECT_EQ(v.values[series(v, p, kFullBudget, kv, "out_err_both")],
                  v.values[series(v, "dense", 0, kv, "out_err_kv")]);
      }
    }
    // The KV dtypes do cost something, so the equalities above are not 0 == 0.
    const size_t kv_err = series(v, "dense", 0, "fp8", "out_err_kv");
    EXPECT_GT(*std::min_element(v.values[kv_err].begin(), v.values[kv_err].end()), 0.0);
  }
}

TEST(SweepProperty, OracleSumHoldsTheMostHeadSummedMassInEveryRow) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed) + ", sweep seed " + std::to_string(kSweepSeed));
  const Fixture& f = fixture();
  const auto& rows = f.plan.rows[0];
  int64_t strict = 0;
  for (size_t i = 0; i < f.points.size(); ++i) {
    const PointValues& v = f.points[i];
    for (int b : f.plan.points[i].budgets) {
      const size_t best = series(v, "oracle_sum", b, "exact", "mass_recall");
      for (SweepPolicy pol : f.s.axes.policies) {
        const size_t other = series(v, to_string(pol), b, "exact", "mass_recall");
        for (size_t r = 0; r < rows.size(); ++r) {
          double sum_best = 0, sum_other = 0;
          for (int h = 0; h < v.heads; ++h) {
            sum_best += v.values[best][r * static_cast<size_t>(v.heads) + static_cast<size_t>(h)];
            sum_other += v.values[other][r * static_cast<size_t>(v.heads) + static_cast<size_t>(h)];
          }
          const double terms = static_cast<double>(v.heads * (rows[r].pos + 1));
          EXPECT_GE(sum_best, sum_other - tol::sweep_mass_order_tol(terms, v.heads))
              << to_string(pol) << " ratio " << f.plan.points[i].ratio << " budget " << b << " row " << r;
          strict += pol == SweepPolicy::kIndexer && sum_best > sum_other;
        }
      }
    }
  }
  EXPECT_GT(strict, 0) << "the oracle never beat the indexer: the property was not exercised";
}

TEST(SweepProperty, RecallNeverFallsAsTheBudgetGrows) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed) + ", sweep seed " + std::to_string(kSweepSeed));
  const Fixture& f = fixture();
  for (size_t i = 0; i < f.points.size(); ++i) {
    const PointValues& v = f.points[i];
    const std::vector<int>& budgets = f.plan.points[i].budgets;
    for (SweepPolicy pol : f.s.axes.policies) {
      const std::string p = to_string(pol);
      for (size_t b = 1; b < budgets.size(); ++b) {
        // Every policy is prefix-closed, so the larger set is a superset and
        // a sum of nonnegative terms over it is never smaller, even rounded.
        const auto& small = v.values[series(v, p, budgets[b - 1], "exact", "mass_recall")];
        const auto& large = v.values[series(v, p, budgets[b], "exact", "mass_recall")];
        for (size_t k = 0; k < small.size(); ++k)
          EXPECT_GE(large[k], small[k]) << p << " ratio " << f.plan.points[i].ratio << " budgets " << budgets[b - 1]
                                        << " -> " << budgets[b] << " value " << k;
      }
    }
  }
}

TEST(SweepProperty, OracleMaxAgreesWithItselfOnBlocks) {
  const Fixture& f = fixture();
  for (size_t i = 0; i < f.points.size(); ++i)
    for (int b : f.plan.points[i].budgets)
      for (double x : f.points[i].values[series(f.points[i], "oracle_max", b, "exact", "block_recall")])
        EXPECT_EQ(x, 1.0);
}

// Octave's window and sink tokens read exact bf16 copies: a window covering
// every context turns each Octave dtype into bf16, bit for bit; with no
// window and no sinks the codec's error shows (3-4 bit codes, far above bf16).
TEST(SweepProperty, OctaveWindowCoveringTheContextReadsBf16Copies) {
  SCOPED_TRACE("gen seed " + std::to_string(kGenSeed));
  QsaConfig c = config_preset("tiny");
  // Octave transforms blocks of 64 and wants a RoPE block of 64; the
  // generator plants its structure in the un-rotated dims, so keep some.
  c.head_dim = 128;
  c.rotary_dim = 64;
  c.indexer_head_dim = 128;
  c.mrope_section = {11, 11, 10};
  GenOptions g;
  g.seed = kGenSeed;
  g.prompt_lens = {37};
  g.decode_steps = 1;
  g.mtp_drafts = 0;
  g.inputs_only = true;
  const SweepTrace t{"gen:octave", "test", generate_trace(c, g)};
  SweepSettings s = settings();
  s.axes.ratios = {4};
  s.axes.policies = {SweepPolicy::kIndexer};
  s.axes.kv_dtypes = {KvDtype::kBf16, KvDtype::kOctaveK3V4, KvDtype::kOctaveK3V3, KvDtype::kOctaveK3V3Compact};
  for (int window : {kFullBudget, 0}) {
    s.octave_window = window;
    s.octave_sinks = 0;
    const SweepPlan plan = plan_sweep({t}, s);
    const PointValues v = run_sweep_point(t, plan.points[0], plan.rows[0], s);
    const auto& bf16 = v.values[series(v, "dense", 0, "bf16", "attn_err_kv")];
    for (const char* octave : {"octave_k3v4", "octave_k3v3", "octave_k3v3_compact"}) {
      const auto& err = v.values[series(v, "dense", 0, octave, "attn_err_kv")];
      if (window > 0) {
        EXPECT_EQ(err, bf16) << octave;
      } else {
        double sum = 0, sum_bf16 = 0;
        for (size_t i = 0; i < err.size(); ++i) sum += err[i], sum_bf16 += bf16[i];
        EXPECT_GT(sum, tol::kSweepOctaveOverBf16 * sum_bf16) << octave;
      }
    }
  }
}

TEST(SweepProperty, BitIdenticalForAnyThreadCount) {
  const Fixture& f = fixture();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const PointValues one = run_sweep_point(f.trace, f.plan.points[1], f.plan.rows[0], f.s);
  omp_set_num_threads(threads);
  EXPECT_EQ(one.values, f.points[1].values);
}

}  // namespace
}  // namespace qsa
