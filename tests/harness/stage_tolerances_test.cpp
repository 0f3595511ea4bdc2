// Stage tolerances: every stage has a positive bound with its formula, the
// contexts order as they should (same implementation < fp32 engine < bf16
// engine), knobs that add roundings widen exactly the stages after them, and
// the global bound separates the measured matched and mismatched profiles.
#include "harness/compare/stage_tolerances.hpp"

#include <gtest/gtest.h>

#include "tests/tolerances.hpp"

namespace qsa {
namespace {

QsaConfig with_profile(const std::string& preset, PrecisionProfile profile) {
  QsaConfig c = config_preset(preset);
  apply_profile(c, profile);
  return c;
}

TEST(StageTolerance, EveryStageHasAPositiveBoundWithItsFormula) {
  for (const std::string preset : {"tiny", "qwen4-exp"}) {
    for (auto profile : {PrecisionProfile::kEngine, PrecisionProfile::kExact, PrecisionProfile::kHfEager}) {
      const QsaConfig c = with_profile(preset, profile);
      for (const auto& stage : tolerance_stage_names()) {
        for (auto ctx : {ToleranceContext::kSameImplementation, ToleranceContext::kEngine}) {
          SCOPED_TRACE(preset + " " + to_string(profile) + " " + stage + " " + to_string(ctx));
          const Tolerance t = stage_tolerance(c, stage, ctx);
          EXPECT_GT(t.rel, 0.0);
          EXPECT_GT(t.abs, 0.0);
          EXPECT_GT(t.rel_l2, 0.0);
          EXPECT_LE(t.rel_l2, t.rel);
          EXPECT_NE(t.why.find(stage), std::string::npos) << t.why;
        }
      }
    }
  }
}

TEST(StageTolerance, UnknownStageThrowsListingTheKnownOnes) {
  const QsaConfig c = config_preset("tiny");
  try {
    stage_tolerance(c, "qq", ToleranceContext::kEngine);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("block_scores"), std::string::npos) << e.what();
  }
}

TEST(StageTolerance, ContextsAndStorageOrderTheBounds) {
  const QsaConfig bf16 = with_profile("tiny", PrecisionProfile::kEngine);
  const QsaConfig fp32 = with_profile("tiny", PrecisionProfile::kExact);
  for (const auto& stage : tolerance_stage_names()) {
    SCOPED_TRACE(stage);
    const Tolerance same = stage_tolerance(bf16, stage, ToleranceContext::kSameImplementation);
    const Tolerance engine32 = stage_tolerance(fp32, stage, ToleranceContext::kEngine);
    const Tolerance engine16 = stage_tolerance(bf16, stage, ToleranceContext::kEngine);
    EXPECT_LT(same.rel, engine32.rel);
    EXPECT_LT(engine32.rel, engine16.rel);
    EXPECT_LT(same.rel_l2, engine32.rel_l2);
    EXPECT_LT(engine32.rel_l2, engine16.rel_l2);
  }
  EXPECT_LT(selection_tie_tolerance(bf16, ToleranceContext::kSameImplementation),
            selection_tie_tolerance(fp32, ToleranceContext::kEngine));
  EXPECT_LT(selection_tie_tolerance(fp32, ToleranceContext::kEngine),
            selection_tie_tolerance(bf16, ToleranceContext::kEngine));
  EXPECT_EQ(selection_tie_tolerance(bf16, ToleranceContext::kEngine), tol::kCompareTestTieTol);
}

TEST(StageTolerance, BoundsGrowAlongTheChain) {
  const QsaConfig c = with_profile("tiny", PrecisionProfile::kEngine);
  const auto rel = [&](const char* stage) { return stage_tolerance(c, stage, ToleranceContext::kEngine).rel; };
  EXPECT_LT(rel("v"), rel("q"));
  EXPECT_LT(rel("q"), rel("attn"));
  EXPECT_LT(rel("attn"), rel("gated"));
  EXPECT_LT(rel("gated"), rel("out"));
  EXPECT_LT(rel("raw_keys"), rel("comp_keys"));
  EXPECT_LT(rel("comp_keys"), rel("block_scores"));
}

TEST(StageTolerance, KnobsWidenOnlyTheStagesAfterThem) {
  QsaConfig base = with_profile("tiny", PrecisionProfile::kEngine);
  QsaConfig fp8_indexer = base;
  fp8_indexer.indexer_dtype = IndexerDtype::kFp8;
  const auto rel = [](const QsaConfig& c, const char* stage) {
    return stage_tolerance(c, stage, ToleranceContext::kEngine).rel;
  };
  EXPECT_GT(rel(fp8_indexer, "index_q"), rel(base, "index_q"));
  EXPECT_GT(rel(fp8_indexer, "block_scores"), rel(base, "block_scores"));
  EXPECT_EQ(rel(fp8_indexer, "q"), rel(base, "q"));
  EXPECT_EQ(rel(fp8_indexer, "out"), rel(base, "out"));

  const QsaConfig hf = with_profile("tiny", PrecisionProfile::kHfEager);
  EXPECT_GT(rel(hf, "attn"), rel(base, "attn"));  // bf16 logits and P, per-op RoPE
  EXPECT_EQ(rel(hf, "v"), rel(base, "v"));
}

// The global bound at the layer output must pass matched roundings and fail
// the measured profile mismatches (stage_tolerances.hpp).
TEST(StageTolerance, GlobalBoundSeparatesMeasuredProfiles) {
  for (const std::string preset : {"tiny", "qwen4-exp"}) {
    SCOPED_TRACE(preset);
    const QsaConfig hf = with_profile(preset, PrecisionProfile::kHfEager);
    const QsaConfig engine = with_profile(preset, PrecisionProfile::kEngine);
    const double hf_out = stage_tolerance(hf, "out", ToleranceContext::kEngine).rel_l2;
    const double engine_out = stage_tolerance(engine, "out", ToleranceContext::kEngine).rel_l2;
    EXPECT_GT(hf_out, tol::kSpecMatchedProfileRelL2);
    EXPECT_LT(hf_out, tol::kSpecWrongProfileRelL2);
    EXPECT_GT(engine_out, tol::kSpecMatchedProfileRelL2);
    EXPECT_LT(engine_out, tol::kEngineVsExactOutRelL2Measured);
  }
}

}  // namespace
}  // namespace qsa
