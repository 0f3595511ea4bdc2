// The generator's traces: deterministic, consistent, and with the attention
// structure they promise (sinks and needles the aligned indexer finds).
#include <gtest/gtest.h>

#include "harness/gen/generator.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 99;

GenOptions options(double alignment) {
  GenOptions o;
  o.seed = kSeed;
  o.prompt_lens = {120, 77};
  o.chunk = 40;
  o.decode_steps = 3;
  o.mtp_drafts = 2;
  o.indexer_alignment = alignment;
  return o;
}

// Fraction of rows that see more blocks than the budget and still pick `block`.
double fraction_selecting(const Trace& t, int32_t block) {
  const int kb = t.config.blocks_budget();
  int64_t rows = 0, hits = 0;
  for (const auto& s : t.steps) {
    const StepLayout l = derive_step_layout(t.config, t.geometry, s.meta);
    for (int64_t r = 0; r < l.num_valid_tokens; ++r) {
      if (l.visible_blocks[r] <= kb) continue;
      ++rows;
      for (int j = 0; j < kb; ++j) hits += s.recorded.block_ids.at(r, j) == block;
    }
  }
  return rows ? static_cast<double>(hits) / static_cast<double>(rows) : 0.0;
}

TEST(Generator, SameSeedSameTraceOtherSeedOtherTrace) {
  const QsaConfig c = config_preset("tiny");
  const Trace a = generate_trace(c, options(1.0));
  const Trace b = generate_trace(c, options(1.0));
  GenOptions o = options(1.0);
  o.seed = kSeed + 1;
  const Trace d = generate_trace(c, o);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].hidden.data, b.steps[i].hidden.data);
    EXPECT_EQ(a.steps[i].recorded.out.data, b.steps[i].recorded.out.data);
  }
  EXPECT_NE(a.steps[0].hidden.data, d.steps[0].hidden.data);
}

TEST(Generator, CoversPrefillChunksMixedDecodeAndMtpSteps) {
  const Trace t = generate_trace(config_preset("tiny"), options(1.0));
  validate_trace(t);
  bool mixed = false, reuse = false, padding = false;
  for (const auto& s : t.steps) {
    bool decode = false, prefill = false;
    for (size_t i = 0; i + 1 < s.meta.query_start_loc.size(); ++i) {
      const int32_t q = s.meta.query_start_loc[i + 1] - s.meta.query_start_loc[i];
      (q == 1 ? decode : prefill) = true;
    }
    mixed = mixed || (decode && prefill);
    reuse = reuse || s.meta.mtp_reuse;
    padding = padding || s.meta.query_start_loc.back() < s.hidden.dim(0);
  }
  EXPECT_TRUE(mixed);
  EXPECT_TRUE(reuse);
  EXPECT_TRUE(padding);
  EXPECT_TRUE(t.steps.back().meta.mtp_reuse);
}

TEST(Generator, AlignedIndexerKeepsTheSinkBlock) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const QsaConfig c = config_preset("tiny");
  const double aligned = fraction_selecting(generate_trace(c, options(1.0)), 0);
  const double random = fraction_selecting(generate_trace(c, options(0.0)), 0);
  EXPECT_GE(aligned, 0.9);
  EXPECT_GT(aligned, random);
}

TEST(Generator, MropePositionsHaveDistinctRows) {
  GenOptions o = options(1.0);
  o.mrope = true;
  const Trace t = generate_trace(config_preset("tiny"), o);
  const TensorI64& pos = t.steps[0].meta.positions;
  ASSERT_EQ(pos.rank(), 2);
  ASSERT_EQ(pos.dim(0), 3);
  bool distinct = false;
  for (int64_t i = 0; i < pos.dim(1); ++i) distinct = distinct || pos.at(1, i) != pos.at(2, i);
  EXPECT_TRUE(distinct);
}

TEST(Generator, RejectsImpossibleOptions) {
  GenOptions o = options(1.0);
  o.prompt_lens = {0};
  EXPECT_THROW(generate_trace(config_preset("tiny"), o), ConfigError);
  QsaConfig bad = config_preset("tiny");
  bad.budget = 7;
  EXPECT_THROW(generate_trace(bad, options(1.0)), ConfigError);
}

}  // namespace
}  // namespace qsa
