// Text rendering of a replay report: aligned tables, then failures with their
// repro commands, notes and the summary line. Widths are measured on the
// plain text and colour is added after padding, so columns line up either way.
#include <algorithm>

#include "harness/compare/report.hpp"
#include "harness/compare/report_tables.hpp"

namespace qsa {
namespace {

constexpr const char* kGreen = "\x1b[32m";
constexpr const char* kRed = "\x1b[31m";
constexpr const char* kYellow = "\x1b[33m";
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kReset = "\x1b[0m";

std::string paint(const std::string& text, const char* code, bool color) {
  return color ? code + text + kReset : text;
}

const char* verdict_color(Verdict v) {
  switch (v) {
    case Verdict::kPass: return kGreen;
    case Verdict::kFail: return kRed;
    case Verdict::kTie: return kYellow;
  }
  return kReset;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

void render_table(const report_detail::Table& t, bool color, std::string& out) {
  std::vector<size_t> widths(t.headers.size());
  for (size_t c = 0; c < t.headers.size(); ++c) widths[c] = t.headers[c].size();
  for (const auto& row : t.rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  const std::string sep = " | ";
  out += paint(t.title, kBold, color) + "\n";
  std::string header;
  size_t rule = 0;
  for (size_t c = 0; c < t.headers.size(); ++c) {
    header += (c ? sep : "") + pad(t.headers[c], widths[c]);
    rule += widths[c] + (c ? sep.size() : 0);
  }
  out += header + "\n" + std::string(rule, '-') + "\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool last = c + 1 == row.size();
      // The last column is not padded: no trailing blanks.
      std::string cell = last ? row[c] : pad(row[c], widths[c]);
      if (last) cell = paint(cell, verdict_color(t.verdicts[i]), color);
      line += (c ? sep : "") + cell;
    }
    out += line + "\n";
  }
  out += "\n";
}

}  // namespace

std::string format_text(const ReplayReport& r, bool color) {
  std::string out = "qsa replay: " + report_detail::header_line(r) + "\n\n";
  for (const auto& t : report_detail::build_tables(r)) render_table(t, color, out);
  for (const auto& f : report_detail::failures(r)) {
    out += paint("FAIL", kRed, color) + " " + f.what + "\n";
    out += "  repro: " + f.repro + "\n";
  }
  for (const auto& note : r.notes) out += "note: " + note + "\n";
  const std::string summary = report_detail::summary_line(r);
  out += paint(summary, r.pass() ? kGreen : kRed, color) + "\n";
  return out;
}

}  // namespace qsa
