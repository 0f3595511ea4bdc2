// QsaConfig: the presets carry spec section 1, validate_config rejects every
// impossible field with the field named (traces are hand-edited, so the
// message is the user's only guide), the ring capacity follows spec section 4,
// profiles are the presets of spec section 11, and names round-trip.
#include "reference/core/config.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "reference/core/errors.hpp"

namespace qsa {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The ConfigError message of validate_config, or "" when the config passes.
std::string validation_error(const QsaConfig& c) {
  try {
    validate_config(c);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Every substring must appear in the message: the field, so a user knows
// which line of a trace to fix.
void expect_rejected(const QsaConfig& c, const std::vector<std::string>& substrings) {
  const std::string msg = validation_error(c);
  ASSERT_FALSE(msg.empty()) << "config was accepted";
  for (const std::string& s : substrings)
    EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' missing from: " << msg;
}

QsaConfig qwen() { return config_preset("qwen4-exp"); }
QsaConfig tiny() { return config_preset("tiny"); }

std::string knobs_to_string(const PrecisionKnobs& k) {
  return "round_storage=" + std::to_string(k.round_storage) + " angle=" + to_string(k.angle) +
         " cos_sin=" + to_string(k.cos_sin) + " rope_per_op=" + std::to_string(k.rope_per_op_rounding) +
         " logits_bf16=" + std::to_string(k.round_logits_bf16) + " p=" + to_string(k.p_rounding) +
         " sigmoid_bf16=" + std::to_string(k.round_sigmoid_bf16);
}

TEST(ConfigPreset, AllPresetsValidate) {
  ASSERT_EQ(config_preset_names(), (std::vector<std::string>{"qwen4-exp", "tiny"}));
  for (const std::string& name : config_preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(validation_error(config_preset(name)), "");
  }
}

TEST(ConfigPreset, Qwen4ExpMatchesSpecSection1) {
  const QsaConfig c = qwen();
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_heads, 24);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.gqa_group(), 12);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.mrope_section, (std::array<int, 3>{11, 11, 10}));
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.indexer_heads, 4);
  EXPECT_EQ(c.indexer_kv_heads, 1);
  EXPECT_EQ(c.indexer_head_dim, 128);
  EXPECT_EQ(c.budget, 2048);
  EXPECT_EQ(c.compress_ratio, 4);
  EXPECT_EQ(c.blocks_budget(), 512);
  EXPECT_EQ(c.row_width(), 2051);
  EXPECT_EQ(c.page_size, 1600);
  EXPECT_EQ(c.compressed_rows_per_page(), 400);
  EXPECT_EQ(c.speculative_tokens, 0);
  EXPECT_EQ(c.profile, PrecisionProfile::kEngine);
  EXPECT_EQ(c.kv_dtype, KvDtype::kBf16);
  EXPECT_EQ(c.indexer_dtype, IndexerDtype::kBf16);
}

TEST(ConfigPreset, UnknownPresetIsNamed) {
  try {
    config_preset("qwen5");
    ADD_FAILURE() << "unknown preset accepted";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("qwen5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("qwen4-exp"), std::string::npos) << msg;
  }
}

// (r, S, P) -> C: r*ceil((r+S)/r), grown by r until it divides P.
TEST(ConfigPreset, RingCapacitySpecExamples) {
  struct Case { int r, s, p, budget, expected; };
  const Case cases[] = {{4, 0, 16, 16, 4},  {4, 1, 1600, 16, 8}, {4, 3, 16, 16, 8},
                        {3, 0, 48, 18, 3},  {8, 1, 16, 16, 16},  {1, 0, 16, 16, 1},
                        {4, 4, 48, 16, 8},  {4, 5, 48, 16, 12},  {4, 5, 32, 16, 16}};
  for (const Case& k : cases) {
    SCOPED_TRACE("r=" + std::to_string(k.r) + " S=" + std::to_string(k.s) + " P=" + std::to_string(k.p));
    QsaConfig c = tiny();
    c.compress_ratio = k.r;
    c.speculative_tokens = k.s;
    c.page_size = k.p;
    c.budget = k.budget;
    ASSERT_EQ(validation_error(c), "");
    EXPECT_EQ(c.ring_capacity(), k.expected);
    EXPECT_EQ(c.page_size % c.ring_capacity(), 0);
    EXPECT_GE(c.ring_capacity(), c.compress_ratio + c.speculative_tokens);
  }
}

TEST(ConfigValidation, RejectsBudgetAndRatio) {
  QsaConfig c = qwen();
  c.budget = 2050;
  expect_rejected(c, {"indexer_budget", "indexer_compress_ratio"});
  c = qwen();
  c.compress_ratio = 0;
  expect_rejected(c, {"indexer_compress_ratio"});
  c.compress_ratio = -4;
  expect_rejected(c, {"indexer_compress_ratio"});
}

TEST(ConfigValidation, RejectsHeads) {
  QsaConfig c = qwen();
  c.num_kv_heads = 5;
  expect_rejected(c, {"num_attention_heads", "num_key_value_heads"});
  c = qwen();
  c.indexer_kv_heads = 2;
  expect_rejected(c, {"indexer_kv_heads"});
}

TEST(ConfigValidation, RejectsRotaryAndMrope) {
  QsaConfig c = qwen();
  c.rotary_dim = 63;
  expect_rejected(c, {"rotary_dim"});
  c = tiny();
  c.rotary_dim = 64;  // D = 32
  c.mrope_section = {11, 11, 10};
  expect_rejected(c, {"rotary_dim", "head_dim"});
  c = qwen();
  c.mrope_section = {11, 11, 11};
  expect_rejected(c, {"mrope_section"});
  c.mrope_section = {22, 11, -1};  // right sum, negative section
  expect_rejected(c, {"mrope_section"});
}

TEST(ConfigValidation, RejectsServingFields) {
  QsaConfig c = qwen();
  c.page_size = 1604;  // divisible by r = 4, not by 16
  expect_rejected(c, {"page_size", "16"});
  c = tiny();
  c.compress_ratio = 3;
  c.budget = 18;
  c.page_size = 16;
  expect_rejected(c, {"page_size", "indexer_compress_ratio"});
  c = qwen();
  c.speculative_tokens = -1;
  expect_rejected(c, {"speculative_tokens"});
  // r = 16 with 2 speculative tokens needs a 32-slot ring: no capacity that
  // divides a 16-token page exists (found by a sweep over data/tiny-fp8.h5).
  c = tiny();
  c.compress_ratio = 16;
  c.speculative_tokens = 2;
  EXPECT_EQ(c.ring_capacity(), 0);
  expect_rejected(c, {"page_size", "raw-key ring"});
}

TEST(ConfigValidation, RejectsBadFp8Scales) {
  for (double bad : {0.0, -1.0, kNan, kInf}) {
    SCOPED_TRACE(bad);
    QsaConfig c = qwen();
    c.kv_dtype = KvDtype::kFp8;
    c.k_scale = bad;
    expect_rejected(c, {"k_scale"});
    c.k_scale = 1.0;
    c.v_scale = bad;
    expect_rejected(c, {"v_scale"});
  }
  QsaConfig ok = qwen();
  ok.kv_dtype = KvDtype::kFp8;
  ok.k_scale = 0.5;
  ok.v_scale = 2.0;
  EXPECT_EQ(validation_error(ok), "");
}

TEST(ConfigValidation, RejectsUnsupportedOctaveShapes) {
  for (KvDtype dtype : {KvDtype::kOctaveK3V4, KvDtype::kOctaveK3V3, KvDtype::kOctaveK3V3Compact}) {
    SCOPED_TRACE(to_string(dtype));
    QsaConfig c = qwen();
    c.kv_dtype = dtype;
    EXPECT_EQ(validation_error(c), "");
    c.head_dim = 192;  // a multiple of 64 but no power of two
    expect_rejected(c, {"head_dim"});
  }
  // Per-block formats transform K's RoPE block alone: it must be 64 dims.
  for (KvDtype dtype : {KvDtype::kOctaveK3V4, KvDtype::kOctaveK3V3}) {
    SCOPED_TRACE(to_string(dtype));
    QsaConfig c = qwen();
    c.kv_dtype = dtype;
    c.rotary_dim = 32;
    c.mrope_section = {6, 5, 5};
    expect_rejected(c, {"rotary_dim", "64"});
    c.kv_dtype = KvDtype::kOctaveK3V3Compact;
    EXPECT_EQ(validation_error(c), "");
  }
}

TEST(ConfigValidation, RejectsNonFiniteEpsAndTheta) {
  for (double bad : {kNan, kInf, -kInf, 0.0, -1.0}) {
    SCOPED_TRACE(bad);
    QsaConfig c = qwen();
    c.rms_norm_eps = bad;
    expect_rejected(c, {"rms_norm_eps"});
    c = qwen();
    c.rope_theta = bad;
    expect_rejected(c, {"rope_theta"});
  }
}

TEST(ConfigValidation, RejectsKnobsThatDifferFromTheNamedProfile) {
  QsaConfig c = qwen();
  c.precision.round_logits_bf16 = true;
  expect_rejected(c, {"engine", "custom"});
  c.profile = PrecisionProfile::kExact;
  expect_rejected(c, {"exact", "custom"});
  c.profile = PrecisionProfile::kCustom;
  EXPECT_EQ(validation_error(c), "");
}

TEST(ConfigProfiles, KnobsOfEachProfile) {
  const PrecisionKnobs off;
  EXPECT_FALSE(off.round_storage || off.rope_per_op_rounding || off.round_logits_bf16 ||
               off.round_sigmoid_bf16);
  EXPECT_EQ(off.angle, AngleMode::kExact);
  EXPECT_EQ(off.cos_sin, CosSinDtype::kExact);
  EXPECT_EQ(off.p_rounding, PRounding::kNone);
  EXPECT_EQ(knobs_to_string(knobs_for_profile(PrecisionProfile::kExact)), knobs_to_string(off));

  PrecisionKnobs engine = off;
  engine.round_storage = true;
  engine.angle = AngleMode::kFp32;
  engine.cos_sin = CosSinDtype::kBf16;
  engine.p_rounding = PRounding::kBf16Unnormalized;
  EXPECT_EQ(knobs_to_string(knobs_for_profile(PrecisionProfile::kEngine)), knobs_to_string(engine));

  PrecisionKnobs hf = engine;  // the storage points plus eager's per-op rounding
  hf.rope_per_op_rounding = true;
  hf.round_logits_bf16 = true;
  hf.p_rounding = PRounding::kBf16Normalized;
  hf.round_sigmoid_bf16 = true;
  EXPECT_EQ(knobs_to_string(knobs_for_profile(PrecisionProfile::kHfEager)), knobs_to_string(hf));

  EXPECT_EQ(knobs_to_string(QsaConfig{}.precision), knobs_to_string(engine));
}

TEST(ConfigProfiles, ApplyProfile) {
  QsaConfig c = qwen();
  apply_profile(c, PrecisionProfile::kHfEager);
  EXPECT_EQ(c.profile, PrecisionProfile::kHfEager);
  EXPECT_EQ(knobs_to_string(c.precision), knobs_to_string(knobs_for_profile(PrecisionProfile::kHfEager)));
  EXPECT_EQ(validation_error(c), "");

  // custom keeps whatever knobs are set and then lets them be mixed freely.
  apply_profile(c, PrecisionProfile::kCustom);
  EXPECT_EQ(c.profile, PrecisionProfile::kCustom);
  EXPECT_EQ(knobs_to_string(c.precision), knobs_to_string(knobs_for_profile(PrecisionProfile::kHfEager)));
  c.precision.angle = AngleMode::kFp32Bf16InvFreq;
  c.precision.round_storage = false;
  EXPECT_EQ(validation_error(c), "");

  apply_profile(c, PrecisionProfile::kExact);
  EXPECT_EQ(knobs_to_string(c.precision), knobs_to_string(PrecisionKnobs{}));
  EXPECT_EQ(validation_error(c), "");
}

// Each value prints and parses back; names are distinct; an unknown name's
// error quotes it and lists every accepted name.
template <class E, class Parse>
void expect_names_round_trip(const std::vector<E>& values, Parse parse) {
  std::set<std::string> seen;
  for (E v : values) {
    const std::string name = to_string(v);
    SCOPED_TRACE(name);
    EXPECT_TRUE(seen.insert(name).second) << "duplicate name";
    EXPECT_EQ(parse(name), v);
  }
  try {
    parse("no-such-name");
    ADD_FAILURE() << "unknown name accepted";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no-such-name"), std::string::npos) << msg;
    for (const std::string& name : seen) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(ConfigNames, EveryEnumRoundTrips) {
  expect_names_round_trip<RopeStyle>({RopeStyle::kNeox, RopeStyle::kGptj}, parse_rope_style);
  expect_names_round_trip<ScoreScale>({ScoreScale::kInvSqrtDim, ScoreScale::kOne}, parse_score_scale);
  expect_names_round_trip<Fp8Flavor>({Fp8Flavor::kE4m3fn, Fp8Flavor::kE4m3fnuz, Fp8Flavor::kE4m3fnEagerNan},
                                     parse_fp8_flavor);
  expect_names_round_trip<KvDtype>({KvDtype::kBf16, KvDtype::kFp8, KvDtype::kOctaveK3V4,
                                    KvDtype::kOctaveK3V3, KvDtype::kOctaveK3V3Compact},
                                   parse_kv_dtype);
  expect_names_round_trip<IndexerDtype>({IndexerDtype::kBf16, IndexerDtype::kFp8}, parse_indexer_dtype);
  expect_names_round_trip<AngleMode>({AngleMode::kExact, AngleMode::kFp32, AngleMode::kFp32Bf16InvFreq},
                                     parse_angle_mode);
  expect_names_round_trip<CosSinDtype>({CosSinDtype::kExact, CosSinDtype::kFp32, CosSinDtype::kBf16},
                                       parse_cos_sin_dtype);
  expect_names_round_trip<PRounding>(
      {PRounding::kNone, PRounding::kBf16Unnormalized, PRounding::kBf16Normalized}, parse_p_rounding);
  expect_names_round_trip<PrecisionProfile>({PrecisionProfile::kExact, PrecisionProfile::kEngine,
                                             PrecisionProfile::kHfEager, PrecisionProfile::kCustom},
                                            parse_precision_profile);
}

// The CLI and traces spell these (docs/semantics.md section 1).
TEST(ConfigNames, PinnedSpellings) {
  EXPECT_EQ(to_string(PrecisionProfile::kHfEager), "hf-eager");
  EXPECT_EQ(to_string(ScoreScale::kInvSqrtDim), "inv_sqrt_dim");
  EXPECT_EQ(to_string(KvDtype::kOctaveK3V3Compact), "octave_k3v3_compact");
  EXPECT_EQ(to_string(Fp8Flavor::kE4m3fnEagerNan), "e4m3fn_eager_nan");
  EXPECT_NE(describe_config(qwen()).find("ring_capacity"), std::string::npos);
}

TEST(ConfigPreset, DerivedQuantities) {
  QsaConfig c = qwen();  // K_B and W: Qwen4ExpMatchesSpecSection1
  EXPECT_EQ(c.index_row_width(), 2051);
  c.count_column = true;
  EXPECT_EQ(c.index_row_width(), 2052);
  EXPECT_EQ(c.row_width(), 2051);
  EXPECT_EQ(c.attention_scale(), 1.0 / 16.0);  // exact: sqrt(256) = 16
  EXPECT_EQ(c.index_score_scale(), 1.0 / std::sqrt(128.0));
  c.score_scale = ScoreScale::kOne;
  EXPECT_EQ(c.index_score_scale(), 1.0);
  EXPECT_FALSE(c.kv_is_octave());
  c.kv_dtype = KvDtype::kOctaveK3V3;
  EXPECT_TRUE(c.kv_is_octave());
  EXPECT_EQ(octave_format(KvDtype::kOctaveK3V4), OctaveFormat::kK3V4);
  EXPECT_EQ(octave_format(KvDtype::kOctaveK3V3), OctaveFormat::kK3V3);
  EXPECT_EQ(octave_format(KvDtype::kOctaveK3V3Compact), OctaveFormat::kK3V3Compact);
  EXPECT_THROW(octave_format(KvDtype::kFp8), InternalError);

  const QsaConfig t = tiny();
  EXPECT_EQ(t.blocks_budget(), 4);
  EXPECT_EQ(t.row_width(), 19);
  EXPECT_EQ(t.compressed_rows_per_page(), 4);
  EXPECT_EQ(t.ring_capacity(), 4);
}

}  // namespace
}  // namespace qsa
