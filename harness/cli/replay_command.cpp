// `qsa replay`: replays a trace and reports which stage diverged, where and
// by how much. Exit 0 when every stage is within tolerance, 1 otherwise.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cstdlib>

#include "harness/atomic_file.hpp"
#include "harness/cli/commands.hpp"
#include "harness/compare/report.hpp"
#include "harness/replay/replay.hpp"
#include "harness/trace/decode_guard.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa::cli {

namespace {

struct ReplayArgs {
  std::string trace;
  std::string mode = "auto";  // isolated for the reference, chained for the GPU
  std::string backend = "reference";
  std::string context = "auto";
  std::string report;
  std::string color = "auto";
  int step = -1;
  std::string stage;
  std::string profile;
  int threads = 0;
  double max_memory_gib = 16;
  bool json = false;
  bool force = false;
};

int run_replay(const ReplayArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  TraceReadOptions ro;
  ro.max_bytes = static_cast<int64_t>(a.max_memory_gib * double(int64_t{1} << 30));
  Trace trace = read_trace_guarded(a.trace, ro);
  if (!a.profile.empty()) {
    // A what-if: replay under another precision profile than the recorded one
    // (e.g. engine against a transformers bf16 trace) to see what it costs.
    apply_profile(trace.config, parse_precision_profile(a.profile));
    validate_config(trace.config);
  }
  ReplayOptions o;
  o.mode = a.mode != "auto"                      ? parse_replay_mode(a.mode)
           : replay_backend_is_gpu(a.backend) ? ReplayMode::kChained
                                              : ReplayMode::kIsolated;
  o.backend = a.backend;
  o.only_step = a.step;
  o.only_stage = a.stage;
  if (a.context != "auto") {
    o.auto_context = false;
    if (a.context == "same")
      o.context = ToleranceContext::kSameImplementation;
    else if (a.context == "engine")
      o.context = ToleranceContext::kEngine;
    else
      throw ConfigError(fmt::format("unknown --context '{}' (accepted: auto, same, engine)", a.context));
  }
  if (isatty(STDERR_FILENO))
    fmt::print(stderr, "replaying {} steps of '{}' ({} mode, backend {})...\n", trace.steps.size(), a.trace,
               to_string(o.mode), o.backend);
  const ReplayReport report = replay_trace(trace, a.trace, o);
  const bool color = a.color == "always" || (a.color == "auto" && isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  if (a.json)
    fmt::print("{}", to_json(report));
  else
    fmt::print("{}", format_text(report, color));
  if (!a.report.empty()) write_file_atomically(a.report, to_html(report), a.force);
  return report.pass() ? 0 : 1;
}

}  // namespace

void add_replay_command(CLI::App& app, CommandContext& ctx) {
  auto a = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand("replay", "replay a trace and diff every recorded stage");
  cmd->add_option("trace", a->trace, "trace file (HDF5, docs/trace-format.md)")->required();
  cmd->add_option("--mode", a->mode,
                  "isolated (each stage fed recorded inputs), chained (end to end) or auto (isolated for the "
                  "reference, chained for hip and both)")
      ->check(CLI::IsMember({"auto", "isolated", "chained"}))
      ->capture_default_str();
  cmd->add_option("--backend", a->backend,
                  "reference (fp64), hip (the GPU kernels against the recording) or both (the GPU against the "
                  "reference, stage by stage); hip and both need a GPU build")
      ->check(CLI::IsMember({"reference", "hip", "both"}))
      ->capture_default_str();
  cmd->add_option("--context", a->context,
                  "tolerances: auto (same for qsa-made traces, engine otherwise), same, engine")
      ->check(CLI::IsMember({"auto", "same", "engine"}));
  cmd->add_option("--step", a->step, "compare only this step")->check(CLI::NonNegativeNumber);
  cmd->add_option("--stage", a->stage, "compare only this stage");
  cmd->add_option("--profile", a->profile, "replay under this precision profile instead of the recorded one");
  cmd->add_flag("--json", a->json, "machine-readable report on stdout");
  cmd->add_option("--report", a->report, "also write a self-contained HTML report");
  cmd->add_flag("--force", a->force, "replace an existing report file");
  cmd->add_option("--color", a->color, "auto, always or never (NO_COLOR is honoured)")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--threads", a->threads, "OpenMP threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-memory", a->max_memory_gib, "GiB a trace may make the reader allocate")
      ->check(CLI::PositiveNumber);
  cmd->callback([a, &ctx] { ctx.exit_code = run_replay(*a); });
}

}  // namespace qsa::cli
