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

#include <ostream>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/attention/sparse_attention_validate.hpp"
#include "gpu/step/step_transfer.hpp"
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

// One step of a driver run: the attention path it took (its phase name)
// and the one kAuto's rule gives the plan of the driver's own token ids
// (resolve_attention_path on plan_sparse_attention_prefill's counts).
struct PathCheck {
  bool took_prefill = false;
  bool rule_prefill = false;
  bool one_row_each = false;
  double reuse = 0.0;  // the plan's, 0 for steps that get none
};

std::vector<PathCheck> path_checks(const StepCase& s) {
  const Trace trace = case_trace(s, true);
  gpu::GpuStepDriver driver(trace.config, trace.weights, trace.geometry);
  const AttentionParams ap = make_attention_params(trace.config);
  const KvCacheParams kvp = make_kv_cache_params(trace.config, trace.geometry.num_pages);
  std::vector<PathCheck> out;
  for (const TraceStep& step : trace.steps) {
    const StepOutputs o = driver.run(step.meta, step.hidden);
    PathCheck c;
    int attention = 0;
    for (const auto& [phase, sec] : o.seconds) {
      attention += phase.rfind("attention+gate", 0) == 0;
      c.took_prefill = c.took_prefill || phase == "attention+gate (prefill path)";
    }
    EXPECT_EQ(attention, 1) << "one attention phase per step";
    const StepLayout& l = o.layout;
    c.one_row_each = l.num_valid_tokens <= l.num_reqs;
    if (l.num_reqs > 0 && l.num_valid_tokens >= int64_t{gpu::kPrefillRowsPerRequest} * l.num_reqs) {
      const gpu::SparseAttentionDims dims =
          gpu::validate_sparse_attention(ap, kvp, o.token_idx, l.token_to_req, l.seq_lens, l.block_table);
      const gpu::SparseAttentionPrefillPlan plan =
          gpu::plan_sparse_attention_prefill(ap, dims, o.token_idx, l.token_to_req, l.seq_lens, l.block_table);
      gpu::SparseAttentionArgs a;
      a.prefill_tiles = plan.tiles.data();  // only compared with null
      a.prefill_num_tiles = plan.num_tiles();
      a.prefill_num_entries = plan.num_entries();
      a.prefill_row_ids = plan.row_ids;
      if (plan.num_entries() > 0) c.reuse = static_cast<double>(plan.row_ids) / static_cast<double>(plan.num_entries());
      c.rule_prefill = gpu::is_prefill_path(gpu::resolve_attention_path(ap, kvp.dtype, dims, a, gpu::AttentionPath::kAuto));
    }
    out.push_back(c);
  }
  return out;
}

// The driver plans prefill-shaped steps and follows kAuto on the plan
// (resolve_attention_path): every step's path is the rule's, decode steps
// never take the prefill path, and with an fp8 cache or hf-eager's
// normalised P a tensor-core build keeps the decode kernel (its prefill
// kernels are bf16, unnormalised P only). In the full-budget trace (ratio 8,
// budget 32, prompts of at most 30 tokens) every prefill row attends its
// whole causal prefix, so a tile's rows attend nested sets and the plan's
// reuse is far above any threshold: its prefill steps take the prefill path
// on every build. The outputs of these configs are checked against the
// reference by the scenarios above.
TEST(GpuStepDriverPaths, EachStepTakesThePathKAutoGivesItsPlan) {
  const StepCase full{"paths_full_budget", "tiny", kEng, kB, iB, false, false, {30, 20}, 12, 8};
  const std::vector<StepCase> cases = {
      full,
      StepCase{"paths_bf16", "tiny", kEng, kB, iB, false, false, {70, 33}, 24, 0},
      StepCase{"paths_fp8", "tiny", kEng, kF, iB, false, false, {70, 33}, 24, 0},
      StepCase{"paths_hf", "tiny", kHf, kB, iB, false, false, {70, 33}, 24, 0}};
  const bool tensor_core = gpu::tensor_core_attention_available(make_attention_params(case_config(full)));
  const std::string reproduce = "qsa_gpu_tests --gtest_filter='GpuStepDriverPaths.*' (trace seed 0x57e9d21e)";
  for (const StepCase& s : cases) {
    const std::vector<PathCheck> steps = path_checks(s);
    int took = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const PathCheck& c = steps[i];
      EXPECT_EQ(c.took_prefill, c.rule_prefill)
          << s.name << " step " << i << " (plan reuse " << c.reuse << "); reproduce: " << reproduce;
      if (c.one_row_each) {
        EXPECT_FALSE(c.took_prefill) << s.name << ": decode step " << i << " took the prefill path";
      }
      took += c.took_prefill;
    }
    if (s.name == full.name) {
      EXPECT_GT(took, 0) << "no prefill step of the full-budget trace took the prefill path; reproduce: "
                         << reproduce;
    }
    if (tensor_core && s.name != full.name && s.name != "paths_bf16") {
      EXPECT_EQ(took, 0) << s.name << " left the tensor-core decode kernel; reproduce: " << reproduce;
    }
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
