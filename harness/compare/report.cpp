// Report content shared by the renderers: verdicts, repro commands, the
// tables' cells and the failure descriptions.
#include "harness/compare/report.hpp"

#include <fmt/format.h>

#include <cmath>

#include "harness/compare/report_tables.hpp"

namespace qsa {
namespace {

bool needs_quoting(const std::string& s) {
  if (s.empty()) return true;
  for (char ch : s) {
    const bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                       ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == ':' || ch == '=';
    if (!plain) return true;
  }
  return false;
}

std::string shell_quote(const std::string& s) {
  if (!needs_quoting(s)) return s;
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string step_cell(int step) { return step >= 0 ? std::to_string(step) : "-"; }
std::string step_prefix(int step) { return step >= 0 ? fmt::format("step {} ", step) : ""; }

std::string worst_cell(const TensorDiff& d, const WorstElement& w, double err) {
  if (err == 0.0) return "0";
  return report_detail::format_error(err) + " " + format_coords(w.coords, d.dims);
}

std::string tensor_failure(const TensorDiff& d) {
  std::vector<std::string> parts;
  if (d.mismatches > 0) {
    const WorstElement& w = d.worst_abs;
    parts.push_back(fmt::format("{} of {} elements outside {} + {}*|e| (worst {} at {}: expected {}, actual {})",
                                d.mismatches, d.count, report_detail::format_error(d.tol.abs),
                                report_detail::format_error(d.tol.rel), report_detail::format_error(w.abs_err),
                                format_coords(w.coords, d.dims), w.expected, w.actual));
  }
  if (d.nonfinite_mismatches > 0) {
    parts.push_back(fmt::format("{} NaN/Inf mask disagreements", d.nonfinite_mismatches));
  }
  if (d.tol.rel_l2 >= 0.0 && !(d.rel_l2 <= d.tol.rel_l2)) {
    parts.push_back(fmt::format("rel L2 {} > {}", report_detail::format_error(d.rel_l2),
                                report_detail::format_error(d.tol.rel_l2)));
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

bool ReplayReport::pass() const { return failed() == 0; }

int64_t ReplayReport::compared() const {
  return static_cast<int64_t>(tensors.size() + selections.size() + token_indices.size());
}

int64_t ReplayReport::failed() const {
  int64_t n = 0;
  for (const auto& d : tensors) n += d.pass ? 0 : 1;
  for (const auto& d : selections) n += d.pass ? 0 : 1;
  for (const auto& d : token_indices) n += d.pass ? 0 : 1;
  return n;
}

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kTie: return "TIE";
  }
  return "?";
}

Verdict verdict(const TensorDiff& d) { return d.pass ? Verdict::kPass : Verdict::kFail; }
Verdict verdict(const SelectionDiff& d) {
  if (!d.pass) return Verdict::kFail;
  return d.tie_flips > 0 ? Verdict::kTie : Verdict::kPass;
}
Verdict verdict(const TokenIndexDiff& d) {
  if (!d.pass) return Verdict::kFail;
  return d.tie_rows > 0 ? Verdict::kTie : Verdict::kPass;
}

std::string repro_command(const ReplayReport& r, int step, const std::string& stage) {
  std::string base = r.repro_base;
  if (base.empty()) {
    base = "qsa replay " + shell_quote(r.trace_path);
    if (!r.mode.empty()) base += " --mode " + shell_quote(r.mode);
  }
  if (step >= 0) base += " --step " + std::to_string(step);
  return base + " --stage " + shell_quote(stage);
}

namespace report_detail {

std::string format_error(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0.0) return "0";
  return fmt::format("{:.3g}", v);
}

std::string format_ulp_hist(const std::array<int64_t, kUlpBuckets>& hist) {
  std::string out;
  for (int b = 0; b < kUlpBuckets; ++b) {
    const int64_t n = hist[static_cast<size_t>(b)];
    if (n > 0) out += (out.empty() ? "" : " ") + ulp_bucket_label(b) + ":" + std::to_string(n);
  }
  return out.empty() ? "-" : out;
}

std::vector<Table> build_tables(const ReplayReport& r) {
  std::vector<Table> tables;
  if (!r.tensors.empty()) {
    Table t;
    t.title = "Tensors";
    t.headers = {"step", "stage", "count", "mismatches", "nonfinite", "max abs (coords)", "max rel", "rel L2",
             "ULP histogram (bf16)", "verdict"};
    for (const auto& d : r.tensors) {
      t.rows.push_back({step_cell(d.step), d.stage, std::to_string(d.count), std::to_string(d.mismatches),
                        std::to_string(d.nonfinite_mismatches), worst_cell(d, d.worst_abs, d.worst_abs.abs_err),
                        format_error(d.worst_rel.rel_err), format_error(d.rel_l2), format_ulp_hist(d.ulp_hist),
                        to_string(verdict(d))});
      t.verdicts.push_back(verdict(d));
      t.tolerances.push_back(fmt::format("abs {}, rel {}, rel L2 {}: {}", format_error(d.tol.abs),
                                         format_error(d.tol.rel), format_error(d.tol.rel_l2), d.tol.why));
    }
    tables.push_back(std::move(t));
  }
  if (!r.selections.empty()) {
    Table t;
    t.title = "Selections";
    t.headers = {"step", "stage", "rows", "identical", "set-equal", "tie flips", "real mismatches",
             "Jaccard mean/min", "worst row", "verdict"};
    for (const auto& d : r.selections) {
      t.rows.push_back({step_cell(d.step), d.stage, std::to_string(d.rows), std::to_string(d.identical_rows),
                        std::to_string(d.set_equal_rows), std::to_string(d.tie_flips),
                        std::to_string(d.real_mismatches),
                        fmt::format("{:.4f}/{:.4f}", d.mean_jaccard, d.min_jaccard),
                        d.worst_row >= 0 ? std::to_string(d.worst_row) : "-", to_string(verdict(d))});
      t.verdicts.push_back(verdict(d));
      t.tolerances.push_back(fmt::format("tie band {} * max(1, |k-th score|)", format_error(d.tie_tol)));
    }
    tables.push_back(std::move(t));
  }
  if (!r.token_indices.empty()) {
    Table t;
    t.title = "Token indices";
    t.headers = {"step", "stage", "rows", "set-equal", "tie rows", "real mismatch rows", "count mismatches",
             "first bad row", "verdict"};
    for (const auto& d : r.token_indices) {
      t.rows.push_back({step_cell(d.step), kTokenIndexStage, std::to_string(d.rows),
                        std::to_string(d.set_equal_rows), std::to_string(d.tie_rows),
                        std::to_string(d.real_mismatch_rows), std::to_string(d.count_mismatches),
                        d.first_bad_row >= 0 ? std::to_string(d.first_bad_row) : "-", to_string(verdict(d))});
      t.verdicts.push_back(verdict(d));
      t.tolerances.push_back("exact per-row id sets and counts; rows of tie-flipped selections excused");
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

std::vector<Failure> failures(const ReplayReport& r) {
  std::vector<Failure> out;
  for (const auto& d : r.tensors) {
    if (d.pass) continue;
    out.push_back({step_prefix(d.step) + d.stage + ": " + tensor_failure(d), repro_command(r, d.step, d.stage)});
  }
  for (const auto& d : r.selections) {
    if (d.pass) continue;
    out.push_back({fmt::format("{}{}: {} ids differ outside the tie band ({} of the k-th score); worst row {} "
                               "(Jaccard {:.4f})",
                               step_prefix(d.step), d.stage, d.real_mismatches, format_error(d.tie_tol),
                               d.worst_row, d.min_jaccard),
                   repro_command(r, d.step, d.stage)});
  }
  for (const auto& d : r.token_indices) {
    if (d.pass) continue;
    out.push_back({fmt::format("{}{}: {} rows differ without a tie flip to explain them (first row {}); {} count "
                               "mismatches",
                               step_prefix(d.step), kTokenIndexStage, d.real_mismatch_rows, d.first_bad_row,
                               d.count_mismatches),
                   repro_command(r, d.step, kTokenIndexStage)});
  }
  return out;
}

std::string summary_line(const ReplayReport& r) {
  int64_t ties = 0;
  for (const auto& d : r.selections) ties += verdict(d) == Verdict::kTie ? 1 : 0;
  for (const auto& d : r.token_indices) ties += verdict(d) == Verdict::kTie ? 1 : 0;
  std::string line = fmt::format("{} stages compared, {} failed", r.compared(), r.failed());
  if (ties > 0) line += fmt::format(", {} with tie flips only", ties);
  return line;
}

std::string header_line(const ReplayReport& r) {
  return fmt::format("trace {}, backend {}, mode {}, seed {}", r.trace_path.empty() ? "-" : r.trace_path,
                     r.backend.empty() ? "-" : r.backend, r.mode.empty() ? "-" : r.mode, r.seed);
}

}  // namespace report_detail
}  // namespace qsa
