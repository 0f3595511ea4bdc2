// `qsa sweep`: recall and error of sparse selection against dense fp64
// attention over budgets, ratios, KV and indexer dtypes (docs/accuracy.md).
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include "harness/cli/commands.hpp"
#include "harness/gen/generator.hpp"
#include "harness/sweep/sweep_runner.hpp"
#include "harness/trace/decode_guard.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa::cli {

namespace {

struct SweepArgs {
  std::vector<std::string> traces;
  std::string output;
  std::vector<int> budgets = {16, 32, 64, 128};
  std::vector<int> ratios = {1, 2, 4, 8};
  std::vector<std::string> kv_dtypes = {"bf16", "fp8"};
  std::vector<std::string> indexer_dtypes = {"bf16"};
  std::vector<std::string> policies = {"indexer", "oracle_max", "oracle_sum", "window", "random"};
  std::string rows = "all";
  uint64_t seed = kDefaultSweepSeed;
  int window_sinks = 4;
  int octave_window = -1;
  int octave_sinks = -1;
  std::string per_row;
  std::string gen_preset;
  GenOptions gen;
  int threads = 0;
  double max_memory_gib = 16;
  bool progress = false;
  bool force = false;
  int point_delay_ms = 0;
};

SweepSettings settings_from(const SweepArgs& a) {
  SweepSettings s;
  s.axes.budgets = a.budgets;
  s.axes.ratios = a.ratios;
  for (const auto& d : a.kv_dtypes) s.axes.kv_dtypes.push_back(parse_kv_dtype(d));
  for (const auto& d : a.indexer_dtypes) s.axes.indexer_dtypes.push_back(parse_indexer_dtype(d));
  for (const auto& p : a.policies) s.axes.policies.push_back(parse_sweep_policy(p));
  s.rows = parse_row_spec(a.rows);
  s.seed = a.seed;
  s.window_sinks = a.window_sinks;
  s.octave_window = a.octave_window;
  s.octave_sinks = a.octave_sinks;
  canonicalize_sweep_settings(s);
  return s;
}

std::vector<SweepTrace> load_inputs(const SweepArgs& a) {
  std::vector<SweepTrace> inputs;
  TraceReadOptions ro;
  ro.max_bytes = static_cast<int64_t>(a.max_memory_gib * double(int64_t{1} << 30));
  ro.load_outputs = false;  // the sweep reruns every step itself
  for (const std::string& path : a.traces) inputs.push_back({path, file_identity(path), read_trace_guarded(path, ro)});
  if (!a.gen_preset.empty()) {
    GenOptions g = a.gen;
    g.inputs_only = true;
    const QsaConfig c = config_preset(a.gen_preset);
    inputs.push_back({fmt::format("gen:{}:seed={}", a.gen_preset, g.seed),
                      fmt::format("preset {}; {}", a.gen_preset, describe_gen_options(g)), generate_trace(c, g)});
  }
  if (inputs.empty()) throw ConfigError("nothing to sweep: give one or more trace files, or --gen-preset");
  return inputs;
}

int run_sweep_command(const SweepArgs& a, const std::string& command_line) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const SweepSettings s = settings_from(a);  // flags first: a typo fails before traces load
  SweepRunOptions o;
  o.output = a.output;
  o.per_row_path = a.per_row;
  o.force = a.force;
  o.progress = a.progress || isatty(STDERR_FILENO);
  o.command_line = command_line;
  o.point_delay_ms = a.point_delay_ms;
  const SweepSummary sum = run_sweep(load_inputs(a), s, o);
  fmt::print("wrote '{}' ({} aggregate lines) and '{}': {} points ({} computed, {} from an earlier run in '{}')\n",
             sum.csv_path, sum.csv_lines, sum.json_path, sum.points, sum.computed, sum.resumed, sum.parts_dir);
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, CommandContext& ctx) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand("sweep", "recall and error of sparse selection against dense attention");
  cmd->add_option("traces", a->traces, "trace files (HDF5); or generate one with --gen-preset");
  cmd->add_option("-o,--output", a->output, "output prefix: OUT.csv, OUT.json and OUT.parts/")->required();
  cmd->add_option("--budgets", a->budgets, "token budgets K")->delimiter(',')->capture_default_str();
  cmd->add_option("--ratios", a->ratios, "compress ratios r (each must divide the page size)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--kv-dtypes", a->kv_dtypes, "bf16, fp8, octave_k3v4, octave_k3v3, octave_k3v3_compact")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--indexer-dtypes", a->indexer_dtypes, "bf16, fp8")->delimiter(',')->capture_default_str();
  cmd->add_option("--policies", a->policies, "indexer, oracle_max, oracle_sum, window, random")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--rows", a->rows, "rows to score: all, every:N, fractions:F,F,...")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the random policy")->capture_default_str();
  cmd->add_option("--window-sinks", a->window_sinks, "tokens the window policy always keeps")->capture_default_str();
  cmd->add_option("--octave-window", a->octave_window, "Octave exact recent tokens (default: the trace's config)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--octave-sinks", a->octave_sinks, "Octave exact first tokens (default: the trace's config)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--per-row", a->per_row, "also write every per-(row, head) value to this CSV");
  CLI::Option* preset = cmd->add_option("--gen-preset", a->gen_preset,
                                        "sweep a trace generated in memory from this preset (tiny, qwen4-exp)");
  // The generator's settings mean nothing without a preset: CLI11 rejects them alone.
  cmd->add_option("--gen-seed", a->gen.seed, "generator seed")->capture_default_str()->needs(preset);
  cmd->add_option("--gen-prompts", a->gen.prompt_lens, "generated prompt lengths")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->needs(preset);
  cmd->add_option("--gen-chunk", a->gen.chunk, "generated chunked-prefill chunk (0: whole prompts)")
      ->check(CLI::NonNegativeNumber)
      ->needs(preset);
  cmd->add_option("--gen-decode", a->gen.decode_steps, "generated decode steps")
      ->check(CLI::NonNegativeNumber)
      ->needs(preset);
  cmd->add_option("--gen-mtp-drafts", a->gen.mtp_drafts, "generated MTP draft steps")
      ->check(CLI::NonNegativeNumber)
      ->needs(preset);
  cmd->add_option("--gen-indexer-alignment", a->gen.indexer_alignment, "generated indexer alignment 0..1")
      ->check(CLI::Range(0.0, 1.0))
      ->needs(preset);
  cmd->add_option("--threads", a->threads, "OpenMP threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-memory", a->max_memory_gib, "GiB a trace may make the reader allocate")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--progress", a->progress, "progress on stderr even when it is not a terminal");
  cmd->add_flag("--force", a->force, "replace existing outputs, or discard another sweep's parts");
  cmd->add_option("--point-delay-ms", a->point_delay_ms, "testing aid: pause after each point")->group("");
  cmd->callback([a, &ctx] { ctx.exit_code = run_sweep_command(*a, ctx.command_line()); });
}

}  // namespace qsa::cli
