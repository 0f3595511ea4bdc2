// Subcommand registration. Each add_*_command wires its options and a
// callback that runs the job and stores the exit code in the context.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reference/core/config.hpp"

namespace qsa::cli {

struct CommandContext {
  int argc;
  char** argv;
  int exit_code = 0;
  std::string command_line() const;  // shell-quoted, for "reproduce with:" lines
};

// Options shared by every command that builds a QsaConfig.
struct ConfigOptions {
  std::string preset = "tiny";
  std::string profile;
  std::string kv_dtype;
  std::string indexer_dtype;
  std::string fp8_flavor;
  std::string score_scale;
  std::optional<int> budget;
  std::optional<int> ratio;
  std::optional<int> page_size;
  std::optional<int> speculative;
  bool count_column = false;
};
void add_config_options(CLI::App& cmd, ConfigOptions& o);
QsaConfig build_config(const ConfigOptions& o);  // validated; ConfigError otherwise

// "name = value" lines of describe_config as pairs (for JSON output).
std::vector<std::pair<std::string, std::string>> split_config(const std::string& described);

void add_example_command(CLI::App& app, CommandContext& ctx);
void add_config_command(CLI::App& app, CommandContext& ctx);
void add_gen_command(CLI::App& app, CommandContext& ctx);
void add_inspect_command(CLI::App& app, CommandContext& ctx);
void add_replay_command(CLI::App& app, CommandContext& ctx);
void add_sweep_command(CLI::App& app, CommandContext& ctx);

}  // namespace qsa::cli
