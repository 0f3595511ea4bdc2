// The report's content laid out once as plain-text cells, so the text and
// HTML renderers show the same numbers and differ only in markup.
// Internal to harness/compare/report_*.cpp.
#pragma once

#include <string>
#include <vector>

#include "harness/compare/report.hpp"

namespace qsa::report_detail {

struct Table {
  std::string title;
  std::vector<std::string> headers;  // the last column is the verdict
  std::vector<std::vector<std::string>> rows;
  std::vector<Verdict> verdicts;     // one per row
  std::vector<std::string> tolerances;  // one per row: the formula (HTML shows it)
};

// Non-empty tables only, in the order tensors, selections, token indices.
std::vector<Table> build_tables(const ReplayReport& r);

struct Failure {
  std::string what;   // "step 3 q: 2 of 4096 elements outside abs + rel*|e| ..."
  std::string repro;  // the command alone
};
std::vector<Failure> failures(const ReplayReport& r);

// "N stages compared, M failed" (+ ", K with tie flips only").
std::string summary_line(const ReplayReport& r);
// "trace x.h5, backend reference, mode isolated, seed 7".
std::string header_line(const ReplayReport& r);

std::string format_error(double v);  // 3 significant digits; "inf", "nan"
std::string format_ulp_hist(const std::array<int64_t, kUlpBuckets>& hist);

}  // namespace qsa::report_detail
