// GPU sparse attention with p_rounding = kBf16Normalized (the hf-eager
// profile: P = bf16(softmax(S)), then P·V) against the reference on fresh
// random steps (sparse_attention_case.hpp: a decode row, a two-row chunk with
// a row that attends nothing, a padding row, an unmapped page, -1 holes, ids
// past seq_len and below -1; random ids repeat, so rows hold duplicates).
// Outputs are poisoned before launch; A and O are held to the fp32 bound plus
// tol::kGpuAttentionBf16NormalizedPRel (one bf16 ulp of P per weight) and
// the knobs' terms (tests/gpu/sparse_attention_run.hpp); rows that attend
// nothing must be exact zeros.
//  - HfEager sweep: the profile's full knob set (apply_profile(kHfEager),
//    make_attention_params / make_gate_params): D {64, 128, 256} x (G, H/G)
//    {(1, 1), (2, 12)} x ids {37 (one split), 2051 (nine splits)} x count
//    column off/on, plus fp8 KV in both flavours and H/G 24 (two head chunks).
//  - NormalizedP sweep: only p_rounding changed, over the exact and engine
//    profiles (no logit rounding: the sharper bound).
//  - Splits: one long row set through splits of 128, 256, 1024 ids and one
//    split; forced duplicates; the prefill routing (kAuto with a plan runs
//    the decode path, kPrefill is a ConfigError).
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/gpu/sparse_attention_case.hpp"
#include "tests/gpu/sparse_attention_run.hpp"

namespace qsa {
namespace {

using gpu::AttentionPath;
using gpu_test::AttnSpec;

// hf_eager: the whole hf-eager profile; otherwise s.profile with only
// p_rounding set to kBf16Normalized (a custom profile).
struct NormSpec {
  AttnSpec attn;
  bool hf_eager = true;
};

std::string norm_name(const NormSpec& s) {
  AttnSpec a = s.attn;
  std::string n = gpu_test::spec_name(a);
  if (s.hf_eager) {
    // spec_name knows only engine/exact: name the profile instead.
    const std::string profile = a.profile == PrecisionProfile::kEngine ? "_engine" : "_exact";
    n.replace(n.find(profile), profile.size(), "_hfeager");
  } else {
    n += "_pnormalized";
  }
  return n;
}

void PrintTo(const NormSpec& s, std::ostream* os) { *os << norm_name(s); }

QsaConfig norm_config(const NormSpec& s) {
  QsaConfig c = gpu_test::case_config(s.attn);
  if (s.hf_eager) {
    apply_profile(c, PrecisionProfile::kHfEager);  // every knob of the profile
  } else {
    c.profile = PrecisionProfile::kCustom;
    c.precision.p_rounding = PRounding::kBf16Normalized;
  }
  return c;
}

gpu_test::AttnCase make_norm_case(const NormSpec& s, uint64_t seed) {
  gpu_test::AttnCase c = gpu_test::make_attn_case(s.attn, norm_config(s), seed);
  EXPECT_EQ(c.params.p_rounding, PRounding::kBf16Normalized);
  if (s.hf_eager) {
    EXPECT_TRUE(c.params.round_logits && c.params.round_output && c.gate_params.round_sigmoid)
        << "the hf-eager profile's knobs must reach the params";
  }
  return c;
}

std::string param_name(const testing::TestParamInfo<NormSpec>& info) { return norm_name(info.param); }

class GpuSparseAttentionNormalized : public testing::TestWithParam<NormSpec> {};

TEST_P(GpuSparseAttentionNormalized, MatchesReference) {
  const NormSpec& s = GetParam();
  const uint64_t seed = gpu_test::case_seed(norm_name(s));
  SCOPED_TRACE(testing::Message() << "seed " << seed << " (override: QSA_TEST_SEED)");
  const gpu_test::AttnCase c = make_norm_case(s, seed);
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c));
}

NormSpec norm_spec(int dim, int kv_heads, int group, int ids, bool count, bool hf_eager,
                   PrecisionProfile profile = PrecisionProfile::kEngine) {
  NormSpec s;
  s.attn.dim = dim;
  s.attn.kv_heads = kv_heads;
  s.attn.group = group;
  s.attn.ids = ids;
  s.attn.count = count;
  s.attn.profile = profile;
  s.hf_eager = hf_eager;
  return s;
}

std::vector<NormSpec> hf_eager_sweep() {
  std::vector<NormSpec> out;
  for (int dim : {64, 128, 256})
    for (int kv_heads : {1, 2})
      for (int ids : {37, 2051})
        for (bool count : {false, true})
          out.push_back(norm_spec(dim, kv_heads, kv_heads == 1 ? 1 : 12, ids, count, /*hf_eager=*/true));
  out.push_back(norm_spec(128, 2, 4, 2051, true, true));
  out.back().attn.kv = KvDtype::kFp8;
  out.push_back(norm_spec(64, 2, 4, 300, false, true));
  out.back().attn.kv = KvDtype::kFp8;
  out.back().attn.flavor = Fp8Flavor::kE4m3fnuz;
  out.push_back(norm_spec(256, 2, 12, 37, true, true));
  out.back().attn.kv = KvDtype::kFp8;
  out.push_back(norm_spec(128, 1, 24, 300, true, true));  // two head chunks per group
  out.push_back(norm_spec(32, 2, 2, 300, false, true));
  return out;
}

std::vector<NormSpec> normalized_p_sweep() {
  std::vector<NormSpec> out;
  for (PrecisionProfile profile : {PrecisionProfile::kExact, PrecisionProfile::kEngine})
    for (int dim : {64, 256})
      for (int ids : {1, 37, 2051})
        out.push_back(norm_spec(dim, 2, 4, ids, ids == 2051, false, profile));
  out.push_back(norm_spec(128, 2, 4, 2051, false, false, PrecisionProfile::kExact));
  out.back().attn.kv = KvDtype::kFp8;
  return out;
}

INSTANTIATE_TEST_SUITE_P(HfEager, GpuSparseAttentionNormalized, testing::ValuesIn(hf_eager_sweep()), param_name);
INSTANTIATE_TEST_SUITE_P(NormalizedP, GpuSparseAttentionNormalized, testing::ValuesIn(normalized_p_sweep()),
                         param_name);

// Every split size, including one split, gives the reference's result (the
// per-split (m, l) merge and the sum of partial PV sums).
TEST(GpuSparseAttentionNormalizedSplits, EverySplitSizeMatchesReference) {
  for (bool hf_eager : {true, false}) {
    const NormSpec s = norm_spec(128, 2, 4, 2051, true, hf_eager, PrecisionProfile::kExact);
    const uint64_t seed = gpu_test::case_seed("normalized-splits");
    const gpu_test::AttnCase c = make_norm_case(s, seed);
    for (int ids_per_split : {128, 256, 1024, 2176}) {
      SCOPED_TRACE(testing::Message() << norm_name(s) << ", seed " << seed << ", ids_per_split " << ids_per_split);
      gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c, ids_per_split));
    }
  }
}

// Ids listed several times: each copy is one softmax term, as in the
// reference. Half of every row's columns repeat an earlier column's id.
TEST(GpuSparseAttentionNormalizedDuplicates, EachCopyIsOneTerm) {
  for (int ids : {37, 600}) {
    const NormSpec s = norm_spec(64, 2, 4, ids, false, true);
    const uint64_t seed = gpu_test::case_seed("normalized-duplicates-" + std::to_string(ids));
    SCOPED_TRACE(testing::Message() << norm_name(s) << ", seed " << seed);
    gpu_test::AttnCase c = make_norm_case(s, seed);
    const CounterRng rng(seed, "gpu.attention.duplicates");
    const int64_t width = c.params.index_width;
    for (int64_t row = 0; row < c.layout.num_tokens; ++row)
      for (int64_t col = 1; col < width; ++col) {
        const uint64_t at = static_cast<uint64_t>(row * width + col);
        const auto earlier = static_cast<int64_t>(rng.bits(2 * at + 1) % static_cast<uint64_t>(col));
        if (rng.bits(2 * at) % 2 == 0) c.token_idx.at(row, col) = c.token_idx.at(row, earlier);
      }
    gpu_test::refresh_reference(c);
    for (int ids_per_split : {128, gpu::kDefaultIdsPerSplit, 1024})
      gpu_test::expect_matches_reference(c, gpu_test::run_gpu(c, ids_per_split));
  }
}

// On a prefill-shaped step with a plan (as the GPU step driver passes one),
// kAuto runs the decode path for bf16-normalised P and matches the
// reference; asking for the prefill path is a ConfigError.
TEST(GpuSparseAttentionNormalizedPath, PrefillStepsRunTheDecodePath) {
  gpu_test::PrefillAttnSpec s;
  s.attn.dim = 128;
  s.attn.kv_heads = 2;
  s.attn.group = 4;
  s.blocks_budget = 64;
  s.ratio = 4;
  s.page = 16;
  s.chunk = {64, 40};
  const uint64_t seed = gpu_test::case_seed("normalized-prefill-route");
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  gpu_test::AttnCase c = gpu_test::make_prefill_attn_case(s, seed);
  const gpu::SparseAttentionPrefillPlan plan = gpu_test::prefill_plan(c);
  gpu::SparseAttentionArgs with_plan;
  with_plan.prefill_tiles = plan.tiles.data();  // only compared with null here
  with_plan.prefill_num_tiles = plan.num_tiles();
  const gpu::SparseAttentionDims dims = gpu_test::validate_case(c);
  ASSERT_EQ(gpu::resolve_attention_path(dims, with_plan, AttentionPath::kAuto), AttentionPath::kPrefill)
      << "the step must be prefill-shaped for this test to mean anything";

  c.params.p_rounding = PRounding::kBf16Normalized;
  gpu_test::refresh_reference(c);
  const KvDtype kv = c.kv_params.dtype;
  EXPECT_EQ(gpu::resolve_attention_path(c.params, kv, dims, with_plan, AttentionPath::kAuto), AttentionPath::kDecode);
  EXPECT_EQ(gpu::resolve_attention_path(c.params, kv, dims, with_plan, AttentionPath::kDecode), AttentionPath::kDecode);
  EXPECT_THROW(gpu::resolve_attention_path(c.params, kv, dims, with_plan, AttentionPath::kPrefill), ConfigError);
  EXPECT_THROW(gpu_test::run_gpu_path(c, AttentionPath::kPrefill, &plan), ConfigError);
  gpu_test::expect_matches_reference(c, gpu_test::run_gpu_path(c, AttentionPath::kAuto, &plan));
}

}  // namespace
}  // namespace qsa
