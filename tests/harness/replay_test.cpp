// Replay end to end: synthetic traces replay clean through the reference in
// both modes, and a wrong stage is pinpointed where it went wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "harness/gen/generator.hpp"
#include "harness/replay/replay.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 424242;

GenOptions small_options() {
  GenOptions o;
  o.seed = kSeed;
  o.prompt_lens = {29, 13};
  o.chunk = 10;  // 10 is not a multiple of r = 4: groups straddle chunks
  o.decode_steps = 2;
  o.mtp_drafts = 2;
  return o;
}

std::vector<std::string> failing(const ReplayReport& r) {
  std::vector<std::string> out;
  for (const auto& d : r.tensors)
    if (!d.pass) out.push_back(d.stage + "@" + std::to_string(d.step));
  for (const auto& d : r.selections)
    if (!d.pass) out.push_back("block_ids@" + std::to_string(d.step));
  for (const auto& d : r.token_indices)
    if (!d.pass) out.push_back("token_idx@" + std::to_string(d.step));
  return out;
}

ReplayReport replay(const Trace& t, ReplayMode mode) {
  ReplayOptions o;
  o.mode = mode;
  return replay_trace(t, "memory", o);
}

TEST(Replay, GeneratedTraceReplaysCleanInBothModes) {
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const Trace t = generate_trace(config_preset("tiny"), small_options());
  for (ReplayMode mode : {ReplayMode::kIsolated, ReplayMode::kChained}) {
    const ReplayReport r = replay(t, mode);
    EXPECT_TRUE(r.pass()) << to_string(mode) << ": " << ::testing::PrintToString(failing(r));
    EXPECT_GT(r.compared(), static_cast<int64_t>(t.steps.size()) * 10);
  }
}

TEST(Replay, SurvivesTheHdf5RoundTrip) {
  const Trace t = generate_trace(config_preset("tiny"), small_options());
  const std::string path = ::testing::TempDir() + "/replay_roundtrip.h5";
  std::filesystem::remove(path);
  write_trace(t, path, {FloatStorage::kAuto, false});
  const ReplayReport r = replay(read_trace(path), ReplayMode::kIsolated);
  EXPECT_TRUE(r.pass()) << ::testing::PrintToString(failing(r));
  std::filesystem::remove(path);
}

// An "engine" whose block scores use scale 1 while its config claims
// 1/sqrt(d_I): the ranking (and everything after it) is unchanged, so
// isolated replay must blame block_scores and nothing else.
TEST(Replay, IsolatedModePinpointsTheWrongStage) {
  QsaConfig engine = config_preset("tiny");
  engine.score_scale = ScoreScale::kOne;
  Trace t = generate_trace(engine, small_options());
  t.config.score_scale = ScoreScale::kInvSqrtDim;
  const std::vector<std::string> bad = failing(replay(t, ReplayMode::kIsolated));
  ASSERT_FALSE(bad.empty());
  for (const auto& f : bad) EXPECT_EQ(f.substr(0, f.find('@')), "block_scores") << f;
}

TEST(Replay, ReportsTheCoordinatesOfACorruptedElement) {
  Trace t = generate_trace(config_preset("tiny"), small_options());
  t.steps[2].recorded.out.at(0, 5) += 0.75;
  const ReplayReport r = replay(t, ReplayMode::kChained);
  EXPECT_EQ(failing(r), std::vector<std::string>{"out@2"});
  const auto it = std::find_if(r.tensors.begin(), r.tensors.end(), [](const TensorDiff& d) { return !d.pass; });
  ASSERT_NE(it, r.tensors.end());
  EXPECT_EQ(it->worst_abs.coords, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(it->mismatches, 1);
}

// Isolated mode feeds recorded values downstream: a recorded q that differs
// from the reference changes the attention the reference computes from it.
TEST(Replay, IsolatedModeFeedsRecordedValuesDownstream) {
  Trace t = generate_trace(config_preset("tiny"), small_options());
  for (double& x : t.steps[1].recorded.q.data) x = -x;
  const std::vector<std::string> isolated = failing(replay(t, ReplayMode::kIsolated));
  EXPECT_NE(std::find(isolated.begin(), isolated.end(), "attn@1"), isolated.end())
      << ::testing::PrintToString(isolated);
  const std::vector<std::string> chained = failing(replay(t, ReplayMode::kChained));
  EXPECT_EQ(chained, std::vector<std::string>{"q@1"});
}

TEST(Replay, RejectsAStepOutOfRangeAndUnknownBackends) {
  const Trace t = generate_trace(config_preset("tiny"), small_options());
  ReplayOptions o;
  o.only_step = 99;
  EXPECT_THROW(replay_trace(t, "memory", o), ConfigError);
  o.only_step = -1;
  o.backend = "hip";
  EXPECT_THROW(replay_trace(t, "memory", o), ConfigError);
}

}  // namespace
}  // namespace qsa
