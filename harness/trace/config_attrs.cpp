#include "harness/trace/config_attrs.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "harness/trace/h5_attrs.hpp"
#include "reference/core/errors.hpp"

namespace qsa {

namespace {

constexpr const char* kWhere = "/config";

// One table drives writing and reading, so the two cannot drift apart.
struct IntField {
  const char* name;
  int QsaConfig::*field;
};
const IntField kIntFields[] = {
    {"hidden_size", &QsaConfig::hidden_size},
    {"num_heads", &QsaConfig::num_heads},
    {"num_kv_heads", &QsaConfig::num_kv_heads},
    {"head_dim", &QsaConfig::head_dim},
    {"rotary_dim", &QsaConfig::rotary_dim},
    {"indexer_heads", &QsaConfig::indexer_heads},
    {"indexer_kv_heads", &QsaConfig::indexer_kv_heads},
    {"indexer_head_dim", &QsaConfig::indexer_head_dim},
    {"budget", &QsaConfig::budget},
    {"compress_ratio", &QsaConfig::compress_ratio},
    {"page_size", &QsaConfig::page_size},
    {"speculative_tokens", &QsaConfig::speculative_tokens},
    {"octave_window", &QsaConfig::octave_window},
    {"octave_sinks", &QsaConfig::octave_sinks},
};

struct DoubleField {
  const char* name;
  double QsaConfig::*field;
};
const DoubleField kDoubleFields[] = {
    {"rope_theta", &QsaConfig::rope_theta},
    {"rms_norm_eps", &QsaConfig::rms_norm_eps},
    {"k_scale", &QsaConfig::k_scale},
    {"v_scale", &QsaConfig::v_scale},
};

struct KnobFlag {
  const char* name;
  bool PrecisionKnobs::*field;
};
const KnobFlag kKnobFlags[] = {
    {"round_storage", &PrecisionKnobs::round_storage},
    {"rope_per_op_rounding", &PrecisionKnobs::rope_per_op_rounding},
    {"round_logits_bf16", &PrecisionKnobs::round_logits_bf16},
    {"round_sigmoid_bf16", &PrecisionKnobs::round_sigmoid_bf16},
};

int read_int(hid_t g, const char* name) {
  const int64_t v = h5::read_attr_int(g, kWhere, name);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw InputError(fmt::format("{} attribute {} = {} does not fit a 32-bit int", kWhere, name, v));
  return static_cast<int>(v);
}

bool read_flag(hid_t g, const char* name) {
  const int64_t v = h5::read_attr_int(g, kWhere, name);
  if (v != 0 && v != 1)
    throw InputError(fmt::format("{} attribute {} = {}, expected 0 or 1", kWhere, name, v));
  return v == 1;
}

// parse_* throws ConfigError listing the accepted names; in a file that is an
// input problem of this attribute.
template <class Parse>
auto read_enum(hid_t g, const char* name, Parse parse) {
  const std::string s = h5::read_attr_string(g, kWhere, name);
  try {
    return parse(s);
  } catch (const ConfigError& e) {
    throw InputError(fmt::format("{} attribute {}: {}", kWhere, name, e.what()));
  }
}

}  // namespace

void write_config_attrs(hid_t g, const QsaConfig& c) {
  for (const auto& f : kIntFields) h5::write_attr_int(g, f.name, c.*f.field);
  h5::write_attr_int(g, "count_column", c.count_column ? 1 : 0);
  for (const auto& f : kDoubleFields) h5::write_attr_double(g, f.name, c.*f.field);
  h5::write_attr_ints(g, "mrope_section", {c.mrope_section[0], c.mrope_section[1], c.mrope_section[2]});
  h5::write_attr_string(g, "rope_style", to_string(c.rope_style));
  h5::write_attr_string(g, "score_scale", to_string(c.score_scale));
  h5::write_attr_string(g, "fp8_flavor", to_string(c.fp8_flavor));
  h5::write_attr_string(g, "kv_dtype", to_string(c.kv_dtype));
  h5::write_attr_string(g, "indexer_dtype", to_string(c.indexer_dtype));
  h5::write_attr_string(g, "profile", to_string(c.profile));
  h5::write_attr_string(g, "angle", to_string(c.precision.angle));
  h5::write_attr_string(g, "cos_sin", to_string(c.precision.cos_sin));
  h5::write_attr_string(g, "p_rounding", to_string(c.precision.p_rounding));
  for (const auto& f : kKnobFlags) h5::write_attr_int(g, f.name, c.precision.*f.field ? 1 : 0);
}

QsaConfig read_config_attrs(hid_t g) {
  QsaConfig c;
  for (const auto& f : kIntFields) c.*f.field = read_int(g, f.name);
  c.count_column = read_flag(g, "count_column");
  for (const auto& f : kDoubleFields) c.*f.field = h5::read_attr_double(g, kWhere, f.name);
  const std::vector<int64_t> mrope = h5::read_attr_ints(g, kWhere, "mrope_section", 3);
  for (size_t i = 0; i < 3; ++i) {
    if (mrope[i] < 0 || mrope[i] > std::numeric_limits<int>::max())
      throw InputError(fmt::format("{} attribute mrope_section[{}] = {} is out of range", kWhere, i, mrope[i]));
    c.mrope_section[i] = static_cast<int>(mrope[i]);
  }
  c.rope_style = read_enum(g, "rope_style", parse_rope_style);
  c.score_scale = read_enum(g, "score_scale", parse_score_scale);
  c.fp8_flavor = read_enum(g, "fp8_flavor", parse_fp8_flavor);
  c.kv_dtype = read_enum(g, "kv_dtype", parse_kv_dtype);
  c.indexer_dtype = read_enum(g, "indexer_dtype", parse_indexer_dtype);
  c.profile = read_enum(g, "profile", parse_precision_profile);
  c.precision.angle = read_enum(g, "angle", parse_angle_mode);
  c.precision.cos_sin = read_enum(g, "cos_sin", parse_cos_sin_dtype);
  c.precision.p_rounding = read_enum(g, "p_rounding", parse_p_rounding);
  for (const auto& f : kKnobFlags) c.precision.*f.field = read_flag(g, f.name);
  return c;
}

}  // namespace qsa
