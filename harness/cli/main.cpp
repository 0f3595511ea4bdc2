// `qsa`: one binary, one subcommand per job. Exit codes follow h5diff:
// 0 success / within tolerance, 1 differences found, 2 usage, input or I/O
// error. Only this file turns exceptions into exit codes.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "harness/cli/commands.hpp"
#include "reference/core/errors.hpp"

int main(int argc, char** argv) {
  CLI::App app{"qsa: correctness reference and simulator for QSA sparse attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qsa 0.1.0");
  qsa::cli::CommandContext ctx{argc, argv};
  qsa::cli::add_example_command(app, ctx);
  qsa::cli::add_config_command(app, ctx);
  qsa::cli::add_gen_command(app, ctx);
  qsa::cli::add_inspect_command(app, ctx);
  qsa::cli::add_replay_command(app, ctx);
  qsa::cli::add_sweep_command(app, ctx);
  try {
    app.parse(argc, argv);
    return ctx.exit_code;
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // CLI11 uses its own codes; every usage error is 2 here
  } catch (const qsa::QsaError& e) {
    const char* kind = e.kind() == qsa::ErrorKind::kInternal ? "internal error (a bug in qsa)" : "error";
    std::fprintf(stderr, "qsa: %s: %s\n", kind, e.what());
    std::fprintf(stderr, "reproduce with: %s\n", ctx.command_line().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qsa: error: %s\nreproduce with: %s\n", e.what(), ctx.command_line().c_str());
    return 2;
  }
}
