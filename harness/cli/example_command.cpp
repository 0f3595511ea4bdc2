// `qsa example`: runs the reference over the built-in example steps and
// prints per-stage summaries. `qsa config`: prints a resolved config.
#include <fmt/format.h>
#include <omp.h>

#include <chrono>

#include "harness/cli/commands.hpp"
#include "harness/example_run.hpp"
#include "harness/stage_summary.hpp"
#include "reference/step_driver.hpp"
#include "reference/weights.hpp"

namespace qsa::cli {

namespace {

struct ExampleArgs {
  ConfigOptions config;
  ExampleOptions example;
  int threads = 0;
  bool quiet = false;
};

int run_example(const ExampleArgs& a) {
  const QsaConfig c = build_config(a.config);
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const ExampleRun run = build_example(c, a.example);
  fmt::print("qsa example: preset {}, seed {}, {} steps, {} OpenMP threads\n", a.config.preset, a.example.seed,
             run.steps.size(), omp_get_max_threads());
  if (!a.quiet) fmt::print("{}\n", describe_config(c));
  StepDriver driver(c, random_weights(c, a.example.seed), run.geometry);
  double total = 0;
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const ExampleStep& s = run.steps[i];
    const auto t0 = std::chrono::steady_clock::now();
    const StepOutputs o = driver.run(s.meta, s.hidden);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += sec;
    fmt::print("step {}: {} — {} requests, {} rows ({} real), {:.3f} s\n", i, s.name, o.layout.num_reqs,
               o.layout.num_tokens, o.layout.num_valid_tokens, sec);
    fmt::print("  selection: {}; {} compressed rows written\n", describe_selection(o, c.count_column),
               o.compressed.token.size());
    std::string phases;
    for (const auto& [phase, t] : o.seconds) phases += fmt::format(" {} {:.3f}s", phase, t);
    fmt::print("  time:{}\n", phases);
    if (!a.quiet) fmt::print("{}\n", format_summaries(summarize_step(o)));
  }
  fmt::print("done: {} steps in {:.3f} s\n", run.steps.size(), total);
  return 0;
}

}  // namespace

void add_example_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<ExampleArgs>();
  CLI::App* cmd = app.add_subcommand("example", "run the fp64 reference on the built-in example steps");
  add_config_options(*cmd, args->config);
  cmd->add_option("--seed", args->example.seed, "seed of weights and hidden states")->capture_default_str();
  cmd->add_option("--prefill", args->example.prefill, "prefill tokens of request 0 (0: preset default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk", args->example.chunk, "chunked-prefill chunk (0: about half)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--decode", args->example.decode_steps, "decode steps")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--mtp,!--no-mtp", args->example.mtp, "append MTP draft steps (default on)");
  cmd->add_option("--threads", args->threads, "OpenMP threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--quiet", args->quiet, "print timings and selection only");
  cmd->callback([args, &ctx] { ctx.exit_code = run_example(*args); });
}

void add_config_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<ConfigOptions>();
  CLI::App* cmd = app.add_subcommand("config", "print a resolved, validated config");
  add_config_options(*cmd, *args);
  cmd->callback([args, &ctx] {
    fmt::print("{}", describe_config(build_config(*args)));
    ctx.exit_code = 0;
  });
}

}  // namespace qsa::cli
