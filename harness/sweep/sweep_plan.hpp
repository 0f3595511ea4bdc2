// What a sweep will compute: its points (trace, ratio, indexer dtype) with
// the budgets valid at each, and the query rows it scores per trace.
//
// Rows are chosen once per trace, independently of the ratio, so that every
// point of a trace scores the same rows and curves over ratios compare like
// with like: a row is eligible when it is a real row of a selecting step (not
// an MTP reuse step) that sees at least one complete block at the largest
// swept ratio (p + 1 >= r_max). Requests are told apart by their ring block
// (their first page unless the trace says otherwise), which is stable across
// steps; a request's final length is the largest seq_len it reaches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/sweep/sweep_settings.hpp"
#include "harness/trace/trace.hpp"

namespace qsa {

// One input: a trace file or a generated trace.
struct SweepTrace {
  std::string label;     // the path as given, or "gen:<preset>:seed=<N>"
  std::string identity;  // content checksum and size, or the generator's settings
  Trace trace;
};

// "fnv1a64=<hex> bytes=<n>" of a file's content; IoError when unreadable.
std::string file_identity(const std::string& path);

inline constexpr int kPositionBuckets = 4;  // q1..q4 of (p + 1) / final length

struct ScoredRow {
  int step = 0;
  int64_t row = 0;  // row of the step's tensors
  int64_t pos = 0;  // p
  int bucket = 0;   // 0..3: (p + 1) / L_final in (0, .25], (.25, .5], (.5, .75], (.75, 1]
};

struct SweepPoint {
  int trace = 0;  // index into the inputs
  int ratio = 0;
  IndexerDtype indexer_dtype = IndexerDtype::kBf16;
  std::vector<int> budgets;  // ascending, each divisible by the ratio
  std::string key;           // file stem of the point's part, unique in the sweep
};

struct SweepPlan {
  std::vector<SweepPoint> points;            // in output order
  std::vector<std::vector<ScoredRow>> rows;  // per trace, in trace order
  std::vector<std::string> notes;            // skipped combinations, and why
};

// ConfigError when a trace admits no (ratio, budget) combination, a KV dtype
// cannot encode a trace's heads (Octave's head_dim / rotary_dim rules), or a
// trace has no row to score.
SweepPlan plan_sweep(const std::vector<SweepTrace>& inputs, const SweepSettings& settings);

// The config a point's driver runs: the trace's, with the point's ratio and
// indexer dtype, the largest swept budget that the ratio divides, bf16 KV and
// the exact profile, so that the swept axes are the only approximations.
QsaConfig point_config(const QsaConfig& trace_config, const SweepPoint& point);

}  // namespace qsa
