#include <fmt/format.h>

#include "harness/cli/commands.hpp"

namespace qsa::cli {

std::string CommandContext::command_line() const {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t'\"$\\;&|<>()*?") == std::string::npos;
    if (!plain) {
      std::string q = "'";
      for (char ch : a) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      a = q + "'";
    }
    out += (i ? " " : "") + a;
  }
  return out;
}

void add_config_options(CLI::App& cmd, ConfigOptions& o) {
  cmd.add_option("--preset", o.preset, "config preset: tiny or qwen4-exp")->capture_default_str();
  cmd.add_option("--profile", o.profile, "precision profile: exact, engine, hf-eager");
  cmd.add_option("--kv-dtype", o.kv_dtype,
                 "main KV dtype: bf16, fp8, octave_k3v4, octave_k3v3, octave_k3v3_compact");
  cmd.add_option("--indexer-dtype", o.indexer_dtype, "indexer dtype: bf16 or fp8");
  cmd.add_option("--fp8-flavor", o.fp8_flavor, "fp8 flavour: e4m3fn, e4m3fnuz, e4m3fn_eager_nan");
  cmd.add_option("--score-scale", o.score_scale, "block-score scale: inv_sqrt_dim or one");
  cmd.add_option("--budget", o.budget, "token budget K (a multiple of the ratio)");
  cmd.add_option("--ratio", o.ratio, "compress ratio r");
  cmd.add_option("--page-size", o.page_size, "KV page size in tokens");
  cmd.add_option("--speculative", o.speculative, "speculative (MTP) tokens S");
  cmd.add_flag("--count-column", o.count_column, "packed token-index rows with a count column");
}

QsaConfig build_config(const ConfigOptions& o) {
  QsaConfig c = config_preset(o.preset);
  if (!o.profile.empty()) apply_profile(c, parse_precision_profile(o.profile));
  if (!o.kv_dtype.empty()) c.kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (!o.indexer_dtype.empty()) c.indexer_dtype = parse_indexer_dtype(o.indexer_dtype);
  if (!o.fp8_flavor.empty()) c.fp8_flavor = parse_fp8_flavor(o.fp8_flavor);
  if (!o.score_scale.empty()) c.score_scale = parse_score_scale(o.score_scale);
  if (o.budget) c.budget = *o.budget;
  if (o.ratio) c.compress_ratio = *o.ratio;
  if (o.page_size) c.page_size = *o.page_size;
  if (o.speculative) c.speculative_tokens = *o.speculative;
  c.count_column = c.count_column || o.count_column;
  validate_config(c);
  return c;
}

}  // namespace qsa::cli
