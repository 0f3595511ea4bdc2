#include "reference/core/config.hpp"

#include <cmath>
#include <fmt/format.h>

#include "reference/core/errors.hpp"

namespace qsa {

namespace {

// One name table per enum drives both printing and parsing, so the two can
// never disagree.
template <class E>
struct NameTable {
  const char* what;
  std::vector<std::pair<E, const char*>> names;

  std::string name(E v) const {
    for (const auto& [e, n] : names)
      if (e == v) return n;
    throw InternalError(fmt::format("unnamed {} value {}", what, static_cast<int>(v)));
  }
  E parse(std::string_view s) const {
    std::string accepted;
    for (const auto& [e, n] : names) {
      if (s == n) return e;
      accepted += (accepted.empty() ? "" : ", ") + std::string(n);
    }
    throw ConfigError(fmt::format("unknown {} '{}' (accepted: {})", what, s, accepted));
  }
};

const NameTable<RopeStyle> kRopeStyles{"rope style", {{RopeStyle::kNeox, "neox"}, {RopeStyle::kGptj, "gptj"}}};
const NameTable<ScoreScale> kScoreScales{
    "score scale", {{ScoreScale::kInvSqrtDim, "inv_sqrt_dim"}, {ScoreScale::kOne, "one"}}};
const NameTable<Fp8Flavor> kFp8Flavors{"fp8 flavour",
                                       {{Fp8Flavor::kE4m3fn, "e4m3fn"},
                                        {Fp8Flavor::kE4m3fnuz, "e4m3fnuz"},
                                        {Fp8Flavor::kE4m3fnEagerNan, "e4m3fn_eager_nan"}}};
const NameTable<KvDtype> kKvDtypes{"KV dtype",
                                   {{KvDtype::kBf16, "bf16"},
                                    {KvDtype::kFp8, "fp8"},
                                    {KvDtype::kOctaveK3V4, "octave_k3v4"},
                                    {KvDtype::kOctaveK3V3, "octave_k3v3"},
                                    {KvDtype::kOctaveK3V3Compact, "octave_k3v3_compact"}}};
const NameTable<IndexerDtype> kIndexerDtypes{
    "indexer dtype", {{IndexerDtype::kBf16, "bf16"}, {IndexerDtype::kFp8, "fp8"}}};
const NameTable<AngleMode> kAngleModes{"angle mode",
                                       {{AngleMode::kExact, "exact"},
                                        {AngleMode::kFp32, "fp32"},
                                        {AngleMode::kFp32Bf16InvFreq, "fp32_bf16_inv_freq"}}};
const NameTable<CosSinDtype> kCosSinDtypes{
    "cos/sin dtype",
    {{CosSinDtype::kExact, "exact"}, {CosSinDtype::kFp32, "fp32"}, {CosSinDtype::kBf16, "bf16"}}};
const NameTable<PRounding> kPRoundings{"P rounding",
                                       {{PRounding::kNone, "none"},
                                        {PRounding::kBf16Unnormalized, "bf16_unnormalized"},
                                        {PRounding::kBf16Normalized, "bf16_normalized"}}};
const NameTable<PrecisionProfile> kProfiles{"precision profile",
                                            {{PrecisionProfile::kExact, "exact"},
                                             {PrecisionProfile::kEngine, "engine"},
                                             {PrecisionProfile::kHfEager, "hf-eager"},
                                             {PrecisionProfile::kCustom, "custom"}}};

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

PrecisionKnobs knobs_for_profile(PrecisionProfile profile) {
  PrecisionKnobs k;
  switch (profile) {
    case PrecisionProfile::kExact:
    case PrecisionProfile::kCustom:
      return k;
    case PrecisionProfile::kEngine:
      k.round_storage = true;
      k.angle = AngleMode::kFp32;
      k.cos_sin = CosSinDtype::kBf16;
      k.p_rounding = PRounding::kBf16Unnormalized;
      return k;
    case PrecisionProfile::kHfEager:
      k.round_storage = true;
      k.angle = AngleMode::kFp32;
      k.cos_sin = CosSinDtype::kBf16;
      k.rope_per_op_rounding = true;
      k.round_logits_bf16 = true;
      k.p_rounding = PRounding::kBf16Normalized;
      k.round_sigmoid_bf16 = true;
      return k;
  }
  return k;
}

void apply_profile(QsaConfig& config, PrecisionProfile profile) {
  config.profile = profile;
  if (profile != PrecisionProfile::kCustom) config.precision = knobs_for_profile(profile);
}

int QsaConfig::ring_capacity() const {
  const int r = compress_ratio;
  // Only meaningful for a config validate_config accepts; guard the loop so
  // an invalid one cannot hang or divide by zero before validation runs.
  if (r <= 0 || page_size <= 0 || page_size % r != 0 || speculative_tokens < 0) return 0;
  int c = r * ((r + speculative_tokens + r - 1) / r);
  while (c <= page_size && page_size % c != 0) c += r;  // r divides page_size: stops there at the latest
  return c <= page_size ? c : 0;                          // no capacity fits one page
}

double QsaConfig::attention_scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

double QsaConfig::index_score_scale() const {
  return score_scale == ScoreScale::kOne ? 1.0 : 1.0 / std::sqrt(static_cast<double>(indexer_head_dim));
}

bool QsaConfig::kv_is_octave() const {
  return kv_dtype == KvDtype::kOctaveK3V4 || kv_dtype == KvDtype::kOctaveK3V3 ||
         kv_dtype == KvDtype::kOctaveK3V3Compact;
}

OctaveFormat octave_format(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kOctaveK3V4: return OctaveFormat::kK3V4;
    case KvDtype::kOctaveK3V3: return OctaveFormat::kK3V3;
    case KvDtype::kOctaveK3V3Compact: return OctaveFormat::kK3V3Compact;
    default: throw InternalError("octave_format called for a non-Octave KV dtype");
  }
}

QsaConfig config_preset(std::string_view name) {
  QsaConfig c;  // defaults are the released model
  if (name == "qwen4-exp") return c;
  if (name == "tiny") {
    c.hidden_size = 64;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 32;
    c.rotary_dim = 16;
    c.rope_theta = 10000.0;
    c.mrope_section = {3, 3, 2};
    c.indexer_heads = 2;
    c.indexer_head_dim = 32;
    c.budget = 16;
    c.compress_ratio = 4;
    c.page_size = 16;
    return c;
  }
  throw ConfigError(fmt::format("unknown config preset '{}' (accepted: qwen4-exp, tiny)", name));
}

std::vector<std::string> config_preset_names() { return {"qwen4-exp", "tiny"}; }

void validate_config(const QsaConfig& c) {
  auto fail = [](const std::string& msg) { throw ConfigError("invalid config: " + msg); };
  auto positive = [&](const char* name, long long v) {
    if (v <= 0) fail(fmt::format("{} = {} must be positive", name, v));
  };
  positive("hidden_size", c.hidden_size);
  positive("num_attention_heads", c.num_heads);
  positive("num_key_value_heads", c.num_kv_heads);
  positive("head_dim", c.head_dim);
  positive("indexer_n_heads", c.indexer_heads);
  positive("indexer_head_dim", c.indexer_head_dim);
  positive("indexer_budget", c.budget);
  positive("indexer_compress_ratio", c.compress_ratio);
  positive("page_size", c.page_size);
  if (c.num_heads % c.num_kv_heads != 0)
    fail(fmt::format("num_attention_heads = {} is not a multiple of num_key_value_heads = {}",
                     c.num_heads, c.num_kv_heads));
  if (c.indexer_kv_heads != 1)
    fail(fmt::format("indexer_kv_heads = {} (every implementation requires 1)", c.indexer_kv_heads));
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    fail(fmt::format("rotary_dim = {} must be positive and even", c.rotary_dim));
  if (c.rotary_dim > c.head_dim || c.rotary_dim > c.indexer_head_dim)
    fail(fmt::format("rotary_dim = {} exceeds head_dim = {} or indexer_head_dim = {}", c.rotary_dim,
                     c.head_dim, c.indexer_head_dim));
  const int pairs = c.rotary_dim / 2;
  if (c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2] != pairs ||
      c.mrope_section[0] < 0 || c.mrope_section[1] < 0 || c.mrope_section[2] < 0)
    fail(fmt::format("mrope_section [{}, {}, {}] must be non-negative and sum to rotary_dim / 2 = {}",
                     c.mrope_section[0], c.mrope_section[1], c.mrope_section[2], pairs));
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta))
    fail(fmt::format("rope_theta = {} must be positive and finite", c.rope_theta));
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps))
    fail(fmt::format("rms_norm_eps = {} must be positive and finite", c.rms_norm_eps));
  if (c.budget % c.compress_ratio != 0)
    fail(fmt::format("indexer_budget = {} is not a multiple of indexer_compress_ratio = {}", c.budget,
                     c.compress_ratio));
  if (c.page_size % 16 != 0)
    fail(fmt::format("page_size = {} must be a multiple of 16", c.page_size));
  if (c.page_size % c.compress_ratio != 0)
    fail(fmt::format("page_size = {} is not divisible by indexer_compress_ratio = {}", c.page_size,
                     c.compress_ratio));
  if (c.speculative_tokens < 0)
    fail(fmt::format("speculative_tokens = {} must be >= 0", c.speculative_tokens));
  if (c.ring_capacity() == 0)
    fail(fmt::format("page_size = {} cannot hold the raw-key ring: r + speculative_tokens = {} needs more than "
                     "one page (the ring's capacity must divide the page size)",
                     c.page_size, c.compress_ratio + c.speculative_tokens));
  if (c.kv_dtype == KvDtype::kFp8) {
    if (!(c.k_scale > 0) || !std::isfinite(c.k_scale) || !(c.v_scale > 0) || !std::isfinite(c.v_scale))
      fail(fmt::format("fp8 KV scales k_scale = {}, v_scale = {} must be positive and finite",
                       c.k_scale, c.v_scale));
  }
  if (c.kv_is_octave()) {
    if (c.octave_window < 0 || c.octave_sinks < 0)
      fail(fmt::format("octave_window = {} and octave_sinks = {} must be >= 0", c.octave_window,
                       c.octave_sinks));
    if (!is_power_of_two(c.head_dim))
      fail(fmt::format("Octave KV needs a power-of-two head_dim (got {})", c.head_dim));
    octave_layout(octave_format(c.kv_dtype), c.head_dim, c.rotary_dim);  // throws its own message
  }
  if (c.profile != PrecisionProfile::kCustom) {
    const PrecisionKnobs k = knobs_for_profile(c.profile);
    const PrecisionKnobs& p = c.precision;
    if (k.round_storage != p.round_storage || k.angle != p.angle || k.cos_sin != p.cos_sin ||
        k.rope_per_op_rounding != p.rope_per_op_rounding || k.round_logits_bf16 != p.round_logits_bf16 ||
        k.p_rounding != p.p_rounding || k.round_sigmoid_bf16 != p.round_sigmoid_bf16)
      fail(fmt::format("precision knobs differ from profile '{}'; set profile 'custom' to change them",
                       to_string(c.profile)));
  }
}

std::string to_string(RopeStyle v) { return kRopeStyles.name(v); }
std::string to_string(ScoreScale v) { return kScoreScales.name(v); }
std::string to_string(Fp8Flavor v) { return kFp8Flavors.name(v); }
std::string to_string(KvDtype v) { return kKvDtypes.name(v); }
std::string to_string(IndexerDtype v) { return kIndexerDtypes.name(v); }
std::string to_string(AngleMode v) { return kAngleModes.name(v); }
std::string to_string(CosSinDtype v) { return kCosSinDtypes.name(v); }
std::string to_string(PRounding v) { return kPRoundings.name(v); }
std::string to_string(PrecisionProfile v) { return kProfiles.name(v); }

RopeStyle parse_rope_style(std::string_view s) { return kRopeStyles.parse(s); }
ScoreScale parse_score_scale(std::string_view s) { return kScoreScales.parse(s); }
Fp8Flavor parse_fp8_flavor(std::string_view s) { return kFp8Flavors.parse(s); }
KvDtype parse_kv_dtype(std::string_view s) { return kKvDtypes.parse(s); }
IndexerDtype parse_indexer_dtype(std::string_view s) { return kIndexerDtypes.parse(s); }
AngleMode parse_angle_mode(std::string_view s) { return kAngleModes.parse(s); }
CosSinDtype parse_cos_sin_dtype(std::string_view s) { return kCosSinDtypes.parse(s); }
PRounding parse_p_rounding(std::string_view s) { return kPRoundings.parse(s); }
PrecisionProfile parse_precision_profile(std::string_view s) { return kProfiles.parse(s); }

std::string describe_config(const QsaConfig& c) {
  std::string out;
  auto line = [&](const char* name, const auto& v) { out += fmt::format("{:<22} = {}\n", name, v); };
  line("hidden_size", c.hidden_size);
  line("heads (H / G)", fmt::format("{} / {}", c.num_heads, c.num_kv_heads));
  line("head_dim", c.head_dim);
  line("rotary_dim", c.rotary_dim);
  line("rope_theta", c.rope_theta);
  line("rope_style", to_string(c.rope_style));
  line("mrope_section", fmt::format("[{}, {}, {}]", c.mrope_section[0], c.mrope_section[1],
                                    c.mrope_section[2]));
  line("indexer (H_I x d_I)", fmt::format("{} x {}", c.indexer_heads, c.indexer_head_dim));
  line("budget / ratio / K_B", fmt::format("{} / {} / {}", c.budget, c.compress_ratio, c.blocks_budget()));
  line("page_size", c.page_size);
  line("ring_capacity", c.ring_capacity());
  line("speculative_tokens", c.speculative_tokens);
  line("score_scale", to_string(c.score_scale));
  line("fp8_flavor", to_string(c.fp8_flavor));
  line("count_column", c.count_column);
  line("profile", to_string(c.profile));
  const PrecisionKnobs& k = c.precision;
  line("  round_storage", k.round_storage);
  line("  angle / cos_sin", fmt::format("{} / {}", to_string(k.angle), to_string(k.cos_sin)));
  line("  rope_per_op_rounding", k.rope_per_op_rounding);
  line("  round_logits_bf16", k.round_logits_bf16);
  line("  p_rounding", to_string(k.p_rounding));
  line("  round_sigmoid_bf16", k.round_sigmoid_bf16);
  line("rms_norm_eps", c.rms_norm_eps);
  line("kv_dtype", to_string(c.kv_dtype));
  if (c.kv_dtype == KvDtype::kFp8) line("k_scale / v_scale", fmt::format("{} / {}", c.k_scale, c.v_scale));
  if (c.kv_is_octave()) line("octave window / sinks", fmt::format("{} / {}", c.octave_window, c.octave_sinks));
  line("indexer_dtype", to_string(c.indexer_dtype));
  return out;
}

}  // namespace qsa
