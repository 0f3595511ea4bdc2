// Settings of a recall-vs-dense accuracy sweep (docs/accuracy.md): the axes
// swept, the selection policies compared, which query rows are scored, and
// the seeds. Everything here decides the numbers a sweep produces, so all of
// it goes into the resume manifest (sweep_runner.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reference/core/config.hpp"

namespace qsa {

// Block selectors compared side by side. Each one ranks the visible blocks of
// a row once, independently of the budget, and a budget of K_B blocks takes
// the first K_B: every policy is prefix-closed, so a larger budget selects a
// superset and mass recall cannot fall as the budget grows.
enum class SweepPolicy {
  kIndexer,    // the QSA indexer's canonical top-k
  kOracleMax,  // Σ_h max_{t in block} P_h(t): the pooling the indexer is distilled from
  kOracleSum,  // Σ_h Σ_{t in block} P_h(t): the most head-summed mass any block set can hold
  kWindow,     // sink blocks, then the most recent blocks
  kRandom,     // a seeded random order of the visible blocks
};
std::string to_string(SweepPolicy p);
SweepPolicy parse_sweep_policy(std::string_view s);  // ConfigError listing the names
std::vector<SweepPolicy> all_sweep_policies();

// Which query rows are scored: all eligible rows, every n-th one in trace
// order, or per request the rows nearest to fractions of its final length.
enum class RowMode { kAll, kEvery, kFractions };
struct RowSpec {
  RowMode mode = RowMode::kAll;
  int64_t every = 1;
  std::vector<double> fractions;
};
RowSpec parse_row_spec(std::string_view s);  // "all", "every:N", "fractions:F,F,..."
std::string to_string(const RowSpec& r);     // the canonical spelling

struct SweepAxes {
  std::vector<int> budgets;  // tokens K, ascending after validation
  std::vector<int> ratios;   // r, ascending after validation
  std::vector<KvDtype> kv_dtypes;
  std::vector<IndexerDtype> indexer_dtypes;
  std::vector<SweepPolicy> policies;
};

inline constexpr uint64_t kDefaultSweepSeed = 20261130;

struct SweepSettings {
  SweepAxes axes;
  RowSpec rows;
  uint64_t seed = kDefaultSweepSeed;  // the random policy's stream
  int window_sinks = 4;               // tokens the window policy always keeps
  int octave_window = -1;             // Octave exact copies; -1: each trace's config
  int octave_sinks = -1;
  bool per_row = false;  // also keep every per-(row, head) value
};

// Sorts budgets and ratios; ConfigError for empty axes, non-positive sizes,
// duplicates, bad row specs or negative window sizes.
void canonicalize_sweep_settings(SweepSettings& s);

// The settings as "key = value" lines in a fixed order (manifest and JSON).
std::vector<std::pair<std::string, std::string>> describe_sweep_settings(const SweepSettings& s);

}  // namespace qsa
