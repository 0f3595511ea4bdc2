// A whole sweep, resumable (docs/accuracy.md, "Running a sweep").
//
// Output prefix OUT: the results OUT.csv and OUT.json, and OUT.parts/, which
// holds manifest.txt (every setting that decides a number, and each trace's
// checksum) and one <point key>.csv per finished point (plus
// <key>.rows.csv with per-row output), each written atomically. A run
//  - with no OUT.parts/manifest.txt starts afresh; existing OUT.csv/OUT.json
//    (or the per-row file) are replaced only with `force`;
//  - with a matching manifest resumes: points whose part exists are skipped,
//    and the sweep's own previous outputs are replaced;
//  - with a different manifest fails naming the first difference, unless
//    `force`, which deletes the old parts and starts over.
// Points are computed and assembled in plan order, never completion order, so
// an interrupted and resumed sweep writes the same bytes as an uninterrupted
// one. Parts are kept after assembly; delete OUT.parts to reclaim the space.
#pragma once

#include <string>
#include <vector>

#include "harness/sweep/sweep_plan.hpp"
#include "harness/sweep/sweep_settings.hpp"

namespace qsa {

inline constexpr const char* kQsaVersion = "qsa 0.1.0";

struct SweepRunOptions {
  std::string output;        // prefix; a trailing ".csv" is dropped
  std::string per_row_path;  // empty: no per-row output
  bool force = false;
  bool progress = false;     // one line per point on stderr, with an ETA
  std::string command_line;  // recorded in the JSON
  int point_delay_ms = 0;    // pause after each computed point (tests interrupt sweeps with it)
};

struct SweepSummary {
  std::string csv_path, json_path, parts_dir;
  int points = 0, computed = 0, resumed = 0;
  int64_t csv_lines = 0;  // without the header
  std::vector<std::string> notes;
};

SweepSummary run_sweep(const std::vector<SweepTrace>& inputs, SweepSettings settings, const SweepRunOptions& options);

std::string sweep_output_prefix(const std::string& output);

// manifest.txt's content: "key = value" lines of the inputs, the settings and
// what they planned (the scored rows and the points).
std::string sweep_manifest(const std::vector<SweepTrace>& inputs, const SweepSettings& settings, const SweepPlan& plan);

}  // namespace qsa
