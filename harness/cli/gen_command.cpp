// `qsa gen`: writes a synthetic trace (docs/cli.md).
#include <fmt/format.h>

#include "harness/cli/commands.hpp"
#include "harness/gen/generator.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa::cli {

namespace {

struct GenArgs {
  ConfigOptions config;
  GenOptions gen;
  std::string output;
  std::string floats = "auto";
  bool force = false;
};

FloatStorage parse_float_storage(const std::string& s) {
  if (s == "auto") return FloatStorage::kAuto;
  if (s == "bf16") return FloatStorage::kBf16;
  if (s == "f32") return FloatStorage::kFloat32;
  if (s == "f64") return FloatStorage::kFloat64;
  throw ConfigError(fmt::format("unknown --floats '{}' (accepted: auto, bf16, f32, f64)", s));
}

int run_gen(const GenArgs& a) {
  const QsaConfig c = build_config(a.config);
  const Trace t = generate_trace(c, a.gen);
  write_trace(t, a.output, {parse_float_storage(a.floats), a.force});
  int64_t tokens = 0;
  for (const auto& s : t.steps) tokens += s.hidden.dim(0);
  fmt::print("wrote '{}': preset {}, seed {}, {} steps, {} rows, outputs {}\n", a.output, a.config.preset, a.gen.seed,
             t.steps.size(), tokens, a.gen.inputs_only ? "not recorded (--inputs-only)" : "recorded by the reference");
  return 0;
}

}  // namespace

void add_gen_command(CLI::App& app, CommandContext& ctx) {
  auto a = std::make_shared<GenArgs>();
  CLI::App* cmd = app.add_subcommand("gen", "write a synthetic trace with sinks, needles and local structure");
  add_config_options(*cmd, a->config);
  cmd->add_option("-o,--output", a->output, "trace file to write")->required();
  cmd->add_option("--seed", a->gen.seed, "seed of weights and hidden states")->capture_default_str();
  cmd->add_option("--prompts", a->gen.prompt_lens, "prompt length of each request (default: preset's)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunk", a->gen.chunk, "chunked-prefill chunk (0: whole prompts)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode", a->gen.decode_steps, "decode steps")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--mtp-drafts", a->gen.mtp_drafts, "MTP draft steps (the first selects, the rest reuse)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--padding", a->gen.padding, "padding rows in decode steps")->check(CLI::NonNegativeNumber);
  cmd->add_option("--sinks", a->gen.sinks, "attention-sink tokens at the start")->check(CLI::NonNegativeNumber);
  cmd->add_option("--needles", a->gen.needle_fractions, "needle positions as fractions of each prompt")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--sink-strength", a->gen.sink_strength, "amplitude of planted sink keys")->check(CLI::NonNegativeNumber);
  cmd->add_option("--needle-strength", a->gen.needle_strength, "amplitude of planted needle keys")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--locality", a->gen.locality, "AR(1) coefficient of the background (0..0.999)")
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_option("--indexer-alignment", a->gen.indexer_alignment,
                  "0: random indexer weights, 1: indexer sees main attention's structure")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--mrope", a->gen.mrope, "3-row positions with an image-like span");
  cmd->add_flag("--inputs-only", a->gen.inputs_only, "do not record the reference's outputs");
  cmd->add_option("--floats", a->floats, "float storage: auto (bf16 when exact, else f64), bf16, f32, f64");
  cmd->add_flag("--force", a->force, "replace an existing output file");
  cmd->callback([a, &ctx] { ctx.exit_code = run_gen(*a); });
}

}  // namespace qsa::cli
