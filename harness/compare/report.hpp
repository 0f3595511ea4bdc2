// Diff reports of a replay: the comparator's results for every stage and
// step, rendered as a text table (stdout, optionally coloured), JSON (--json)
// or a self-contained HTML page (--report FILE). Every failing stage gets a
// one-line command that reproduces it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/compare/compare.hpp"

namespace qsa {

struct ReplayReport {
  std::string trace_path;
  std::string backend;  // "reference", "cuda", ...
  std::string mode;     // "isolated", "chained"
  uint64_t seed = 0;
  std::vector<TensorDiff> tensors;
  std::vector<SelectionDiff> selections;
  std::vector<TokenIndexDiff> token_indices;
  std::vector<std::string> notes;
  std::string repro_base;  // e.g. "qsa replay x.h5 --mode isolated"; empty: built from the fields above

  bool pass() const;
  int64_t compared() const;  // stages x steps compared
  int64_t failed() const;
};

// TIE: a selection (or the token rows expanded from it) that differs only
// by tie flips; it passes.
enum class Verdict { kPass, kFail, kTie };
std::string to_string(Verdict v);  // "PASS", "FAIL", "TIE"
Verdict verdict(const TensorDiff& d);
Verdict verdict(const SelectionDiff& d);
Verdict verdict(const TokenIndexDiff& d);

inline constexpr const char* kTokenIndexStage = "token_idx";

// "<repro_base> --step N --stage NAME" (--step left out when step < 0; the
// stage shell-quoted when it needs to be).
std::string repro_command(const ReplayReport& r, int step, const std::string& stage);

// Tables for tensors, selections and token indices (step | stage | count |
// mismatches | nonfinite | max abs (coords) | max rel | rel L2 | ULP
// histogram | verdict, and the analogous columns for selections), then for
// each failure a line saying what broke and "repro: <command>", the notes,
// and "N stages compared, M failed". ANSI colours only when `color`.
std::string format_text(const ReplayReport& r, bool color);

// Everything, machine-readable (non-finite numbers as "NaN"/"Infinity").
std::string to_json(const ReplayReport& r);

// A self-contained page: inline CSS, no scripts, the same tables with
// coloured verdict cells and each stage's tolerance formula; all text escaped.
std::string to_html(const ReplayReport& r);

}  // namespace qsa
