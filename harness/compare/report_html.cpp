// HTML rendering of a replay report: one self-contained page (inline CSS, no
// scripts, nothing fetched from the network) so it can be attached to an
// issue or opened from a CI artifact as is. Every piece of text is escaped.
#include <cctype>

#include "harness/compare/report.hpp"
#include "harness/compare/report_tables.hpp"

namespace qsa {
namespace {

constexpr const char* kStyle = R"css(
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { background: #d4f4d4; color: #135e13; font-weight: bold; }
td.fail { background: #f9d0d0; color: #8b1010; font-weight: bold; }
td.tie { background: #fff1c2; color: #7a5a00; font-weight: bold; }
td.tol { color: #555; font-size: 0.85em; max-width: 40em; }
code { background: #f4f4f4; padding: 0.1em 0.3em; }
.summary.pass { color: #135e13; } .summary.fail { color: #8b1010; }
)css";

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

const char* verdict_class(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kTie: return "tie";
  }
  return "";
}

bool numeric(const std::string& cell) {
  return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell == "-");
}

void render_table(const report_detail::Table& t, std::string& out) {
  out += "<h2>" + escape(t.title) + "</h2>\n<table>\n<tr>";
  for (const auto& h : t.headers) out += "<th>" + escape(h) + "</th>";
  out += "<th>tolerance</th></tr>\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& row = t.rows[i];
    out += "<tr>";
    for (size_t c = 0; c < row.size(); ++c) {
      if (c + 1 == row.size()) {
        out += std::string("<td class=\"") + verdict_class(t.verdicts[i]) + "\">" + escape(row[c]) + "</td>";
      } else {
        out += std::string(c >= 2 && numeric(row[c]) ? "<td class=\"num\">" : "<td>") + escape(row[c]) + "</td>";
      }
    }
    out += "<td class=\"tol\">" + escape(t.tolerances[i]) + "</td></tr>\n";
  }
  out += "</table>\n";
}

}  // namespace

std::string to_html(const ReplayReport& r) {
  const bool pass = r.pass();
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<title>qsa replay: " + escape(r.trace_path) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += "<h1>qsa replay: " + escape(r.trace_path) + "</h1>\n";
  out += "<p>" + escape(report_detail::header_line(r)) + "</p>\n";
  out += std::string("<p class=\"summary ") + (pass ? "pass" : "fail") + "\"><strong>" +
         escape(report_detail::summary_line(r)) + "</strong></p>\n";
  for (const auto& t : report_detail::build_tables(r)) render_table(t, out);
  const auto fails = report_detail::failures(r);
  if (!fails.empty()) {
    out += "<h2>Failures</h2>\n<ul>\n";
    for (const auto& f : fails) {
      out += "<li>" + escape(f.what) + "<br>repro: <code>" + escape(f.repro) + "</code></li>\n";
    }
    out += "</ul>\n";
  }
  if (!r.notes.empty()) {
    out += "<h2>Notes</h2>\n<ul>\n";
    for (const auto& n : r.notes) out += "<li>" + escape(n) + "</li>\n";
    out += "</ul>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace qsa
