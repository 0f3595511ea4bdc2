// The GPU step driver (gpu/step/) end to end against the reference: generated
// traces (harness/gen) replayed with `--backend both` semantics, i.e. both
// drivers chained from the same initial state and every stage of every step
// compared with the replay comparator and the engine tolerances
// (harness/compare/stage_tolerances.hpp: the GPU accumulates in fp32 and
// stores bf16 like an engine), selections tie-aware. Scenarios: chunked
// prefill with groups straddling chunks, decode with padding rows, mixed
// batches, MTP draft steps, mRoPE, bf16/fp8 indexer and KV, the count
// column, the engine and hf-eager profiles, the tiny preset and the
// qwen4-exp shapes. Also: the driver's rejections (unsupported configs,
// isolated mode, stale cache reads) name the problem.
#include "gpu/step/gpu_step_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "harness/compare/report.hpp"
#include "harness/gen/generator.hpp"
#include "harness/replay/replay.hpp"
#include "reference/core/stage_params.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

struct StepCase {
  std::string name;
  std::string preset;
  PrecisionProfile profile;
  KvDtype kv;
  IndexerDtype indexer;
  bool count_column;
  bool mrope;
  std::vector<int64_t> prompts;
  int64_t chunk;
  int compress_ratio;  // 0: the preset's
};

void PrintTo(const StepCase& c, std::ostream* os) { *os << c.name; }

QsaConfig case_config(const StepCase& s) {
  QsaConfig c = config_preset(s.preset);
  apply_profile(c, s.profile);
  c.kv_dtype = s.kv;
  c.indexer_dtype = s.indexer;
  c.count_column = s.count_column;
  if (s.kv == KvDtype::kFp8) {
    c.k_scale = 0.05;
    c.v_scale = 0.04;
  }
  if (s.compress_ratio > 0) {
    c.compress_ratio = s.compress_ratio;
    c.budget = 4 * s.compress_ratio;
  }
  validate_config(c);
  return c;
}

Trace case_trace(const StepCase& s, bool inputs_only) {
  GenOptions g;
  g.seed = 0x57e9d21eULL;
  g.prompt_lens = s.prompts;
  g.chunk = s.chunk;
  g.decode_steps = 3;
  g.mtp_drafts = 3;
  g.padding = 2;
  g.mrope = s.mrope;
  g.inputs_only = inputs_only;
  return generate_trace(case_config(s), g);
}

std::string repro(const StepCase& s) {
  return "qsa_gpu_tests --gtest_filter='*GpuStepDriver*" + s.name + "*' (trace seed 0x57e9d21e)";
}

// The message of the E that fn must throw.
template <class E, class Fn>
std::string error_message(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception of the named type";
  return "";
}

class GpuStepDriverTest : public testing::TestWithParam<StepCase> {};

TEST_P(GpuStepDriverTest, EveryStageMatchesTheReference) {
  const StepCase& s = GetParam();
  const Trace trace = case_trace(s, /*inputs_only=*/true);
  ReplayOptions o;
  o.mode = ReplayMode::kChained;
  o.backend = "both";
  const ReplayReport report = replay_trace(trace, "<generated " + s.name + ">", o);
  EXPECT_GT(report.compared(), 0);
  EXPECT_TRUE(report.pass()) << format_text(report, false) << "\nreproduce: " << repro(s);
}

// The GPU against the recording the reference made (what `qsa replay
// --backend hip` does with a bundled trace).
class GpuStepDriverRecordedTest : public testing::TestWithParam<StepCase> {};

TEST_P(GpuStepDriverRecordedTest, ReplaysTheRecordedTrace) {
  const StepCase& s = GetParam();
  const Trace trace = case_trace(s, /*inputs_only=*/false);
  ReplayOptions o;
  o.mode = ReplayMode::kChained;
  o.backend = "hip";
  const ReplayReport report = replay_trace(trace, "<generated " + s.name + ">", o);
  EXPECT_TRUE(report.pass()) << format_text(report, false) << "\nreproduce: " << repro(s);
}

const PrecisionProfile kEng = PrecisionProfile::kEngine;
const PrecisionProfile kHf = PrecisionProfile::kHfEager;
const KvDtype kB = KvDtype::kBf16, kF = KvDtype::kFp8;
const IndexerDtype iB = IndexerDtype::kBf16, iF = IndexerDtype::kFp8;

std::vector<StepCase> tiny_cases() {
  return {
      StepCase{"tiny_engine_chunked", "tiny", kEng, kB, iB, false, false, {70, 33}, 24, 0},
      StepCase{"tiny_engine_fp8kv_fp8idx", "tiny", kEng, kF, iF, false, false, {70, 33}, 24, 0},
      StepCase{"tiny_engine_count", "tiny", kEng, kB, iB, true, false, {61, 9}, 0, 0},
      StepCase{"tiny_hf_eager", "tiny", kHf, kB, iB, false, false, {70, 33}, 16, 0},
      StepCase{"tiny_mrope", "tiny", kEng, kB, iB, false, true, {64, 40}, 32, 0},
      StepCase{"tiny_r1", "tiny", kEng, kB, iB, false, false, {40, 17}, 12, 1},
      StepCase{"tiny_r8", "tiny", kEng, kB, iB, true, false, {90, 45}, 30, 8},
  };
}

std::vector<StepCase> all_cases() {
  std::vector<StepCase> cases = tiny_cases();
  cases.push_back(StepCase{"qwen4_engine", "qwen4-exp", kEng, kB, iB, false, false, {2600, 300}, 1024, 0});
  cases.push_back(StepCase{"qwen4_fp8", "qwen4-exp", kEng, kF, iF, true, false, {2300}, 0, 0});
  return cases;
}

std::string case_name(const testing::TestParamInfo<StepCase>& i) { return i.param.name; }

INSTANTIATE_TEST_SUITE_P(Scenarios, GpuStepDriverTest, testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Scenarios, GpuStepDriverRecordedTest, testing::ValuesIn(tiny_cases()), case_name);

TEST(GpuStepDriverChecks, RejectsWhatTheKernelsDoNotImplement) {
  QsaConfig exact = config_preset("tiny");
  apply_profile(exact, PrecisionProfile::kExact);
  EXPECT_NE(error_message<ConfigError>([&] { gpu::check_gpu_supported(exact); }).find("round_storage"),
            std::string::npos);
  QsaConfig octave = config_preset("qwen4-exp");  // Octave's window and sinks fit its pages
  octave.kv_dtype = KvDtype::kOctaveK3V4;
  EXPECT_NE(error_message<ConfigError>([&] { gpu::check_gpu_supported(octave); }).find("kv_dtype"),
            std::string::npos);
}

TEST(GpuStepDriverChecks, IsolatedModeIsAConfigError) {
  const StepCase s{"tiny", "tiny", kEng, kB, iB, false, false, {20}, 0, 0};
  const Trace trace = case_trace(s, true);
  ReplayOptions o;
  o.mode = ReplayMode::kIsolated;
  o.backend = "hip";
  EXPECT_NE(error_message<ConfigError>([&] { replay_trace(trace, "t", o); }).find("chained"), std::string::npos);
}

// Which attention path the driver took on each step, from its phase names.
std::vector<bool> prefill_steps(const StepCase& s) {
  const Trace trace = case_trace(s, true);
  gpu::GpuStepDriver driver(trace.config, trace.weights, trace.geometry);
  std::vector<bool> prefill;
  for (const TraceStep& step : trace.steps) {
    const StepOutputs o = driver.run(step.meta, step.hidden);
    int attention = 0;
    bool took_prefill = false;
    for (const auto& [phase, sec] : o.seconds) {
      attention += phase.rfind("attention+gate", 0) == 0;
      took_prefill = took_prefill || phase == "attention+gate (prefill path)";
    }
    EXPECT_EQ(attention, 1) << "one attention phase per step";
    prefill.push_back(took_prefill);
  }
  return prefill;
}

// The driver builds the prefill plan for prefill-shaped steps and lets kAuto
// choose (resolve_attention_path). In the tiny chunked trace every chunk's
// rows attend nearly the same ids (the budget covers most of the context),
// so its prefill steps take the prefill path on every build: by shape where
// there is no tensor-core decode kernel, by the plan's reuse where there is.
// Decode steps never do. With an fp8 cache or hf-eager's normalised P a
// tensor-core build keeps the decode kernel (its prefill kernels are bf16,
// unnormalised P only); the outputs of all three are checked against the
// reference by the scenarios above.
TEST(GpuStepDriverPaths, PrefillStepsTakeThePathKAutoResolves) {
  const StepCase bf16{"paths_bf16", "tiny", kEng, kB, iB, false, false, {70, 33}, 24, 0};
  const Trace trace = case_trace(bf16, true);
  const std::vector<bool> taken = prefill_steps(bf16);
  ASSERT_EQ(taken.size(), trace.steps.size());
  int prefill = 0;
  for (size_t i = 0; i < taken.size(); ++i) {
    const StepMetadata& m = trace.steps[i].meta;
    const bool one_row_each = m.query_start_loc.back() <= static_cast<int64_t>(m.seq_lens.size());
    if (one_row_each) {
      EXPECT_FALSE(taken[i]) << "decode step " << i << " took the prefill path";
    }
    prefill += taken[i];
  }
  EXPECT_GT(prefill, 0) << "no prefill step of the tiny chunked trace took the prefill path; reproduce: "
                        << repro(bf16);

  const AttentionParams p = make_attention_params(trace.config);
  if (!gpu::tensor_core_attention_available(p)) return;  // (no tensor-core decode kernel to keep)
  for (const StepCase& s : {StepCase{"paths_fp8", "tiny", kEng, kF, iB, false, false, {70, 33}, 24, 0},
                            StepCase{"paths_hf", "tiny", kHf, kB, iB, false, false, {70, 33}, 24, 0}}) {
    const std::vector<bool> t = prefill_steps(s);
    EXPECT_EQ(std::count(t.begin(), t.end(), true), 0) << s.name << ": reproduce: " << repro(s);
  }
}

// A decode step whose context was never written: the tag mirrors catch it
// before any kernel reads the poisoned cache.
TEST(GpuStepDriverChecks, StaleCacheReadsAreInputErrors) {
  const QsaConfig c = config_preset("tiny");
  gpu::GpuStepDriver driver(c, random_weights(c, 7), CacheGeometry{8, 2});
  const StepMetadata meta = simple_step({40}, {1}, 4);
  const TensorD hidden = test::random_normal({1, c.hidden_size}, 11, "gpu.step.hidden");
  EXPECT_NE(error_message<InputError>([&] { driver.run(meta, hidden); }).find("never written"), std::string::npos);
}

}  // namespace
}  // namespace qsa

namespace qsa {
namespace {

// Issue 8's determinism promise for the GPU: two fresh drivers over the same
// trace give the same bits in every output of every step (fixed reduction
// orders, no atomics on values, a radix top-k with canonical tie order).
TEST(GpuStepDriverDeterminism, RunToRunBitIdentical) {
  const StepCase s{"det", "tiny", kEng, kF, iB, true, false, {70, 33}, 24, 0};
  const Trace trace = case_trace(s, true);
  std::vector<std::vector<StepOutputs>> runs(2);
  for (auto& run : runs) {
    gpu::GpuStepDriver driver(trace.config, trace.weights, trace.geometry);
    for (const TraceStep& step : trace.steps) run.push_back(driver.run(step.meta, step.hidden));
  }
  ASSERT_EQ(runs[0].size(), trace.steps.size());
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    const StepOutputs& a = runs[0][i];
    const StepOutputs& b = runs[1][i];
    EXPECT_EQ(a.index_q.data, b.index_q.data) << "step " << i;
    EXPECT_EQ(a.compressed.keys.data, b.compressed.keys.data) << "step " << i;
    EXPECT_EQ(a.block_ids.data, b.block_ids.data) << "step " << i;
    EXPECT_EQ(a.block_scores.data, b.block_scores.data) << "step " << i;
    EXPECT_EQ(a.token_idx.data, b.token_idx.data) << "step " << i;
    EXPECT_EQ(a.q.data, b.q.data) << "step " << i;
    EXPECT_EQ(a.attn.data, b.attn.data) << "step " << i;
    EXPECT_EQ(a.gated.data, b.gated.data) << "step " << i;
    EXPECT_EQ(a.out.data, b.out.data) << "step " << i;
  }
}

}  // namespace
}  // namespace qsa
