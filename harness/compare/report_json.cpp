// JSON rendering of a replay report: every field of every diff, plus each
// failure's repro command, for scripts and dashboards.
#include "harness/compare/json_writer.hpp"
#include "harness/compare/report.hpp"
#include "harness/compare/report_tables.hpp"

namespace qsa {
namespace {

void write_int_array(JsonWriter& w, const std::vector<int64_t>& v) {
  w.begin_array();
  for (int64_t x : v) w.value(x);
  w.end_array();
}

void write_worst(JsonWriter& w, const WorstElement& e, const std::vector<std::string>& dims) {
  w.begin_object();
  w.key("coords");
  write_int_array(w, e.coords);
  w.field("where", e.coords.empty() ? std::string() : format_coords(e.coords, dims));
  w.field("expected", e.expected).field("actual", e.actual);
  w.field("abs_err", e.abs_err).field("rel_err", e.rel_err);
  w.end_object();
}

void write_tensor(JsonWriter& w, const ReplayReport& r, const TensorDiff& d) {
  w.begin_object();
  w.field("step", d.step).field("stage", d.stage);
  w.key("shape");
  write_int_array(w, d.shape);
  w.key("dims").begin_array();
  for (const auto& n : d.dims) w.value(n);
  w.end_array();
  w.field("count", d.count).field("mismatches", d.mismatches);
  w.field("nonfinite_mismatches", d.nonfinite_mismatches).field("rel_l2", d.rel_l2);
  w.key("worst_abs");
  write_worst(w, d.worst_abs, d.dims);
  w.key("worst_rel");
  write_worst(w, d.worst_rel, d.dims);
  w.key("ulp_hist").begin_object();
  for (int b = 0; b < kUlpBuckets; ++b) w.field(ulp_bucket_label(b), d.ulp_hist[static_cast<size_t>(b)]);
  w.end_object();
  w.key("tolerance").begin_object();
  w.field("abs", d.tol.abs).field("rel", d.tol.rel).field("rel_l2", d.tol.rel_l2).field("why", d.tol.why);
  w.end_object();
  w.field("verdict", to_string(verdict(d))).field("pass", d.pass);
  if (!d.pass) w.field("repro", repro_command(r, d.step, d.stage));
  w.end_object();
}

void write_selection(JsonWriter& w, const ReplayReport& r, const SelectionDiff& d) {
  w.begin_object();
  w.field("step", d.step).field("stage", d.stage).field("rows", d.rows);
  w.field("identical_rows", d.identical_rows).field("set_equal_rows", d.set_equal_rows);
  w.field("tie_flips", d.tie_flips).field("real_mismatches", d.real_mismatches);
  w.field("mean_jaccard", d.mean_jaccard).field("min_jaccard", d.min_jaccard).field("worst_row", d.worst_row);
  w.field("tie_tol", d.tie_tol);
  w.key("tie_rows").begin_array();
  for (size_t i = 0; i < d.tie_rows.size(); ++i) {
    if (d.tie_rows[i]) w.value(static_cast<int64_t>(i));
  }
  w.end_array();
  w.field("verdict", to_string(verdict(d))).field("pass", d.pass);
  if (!d.pass) w.field("repro", repro_command(r, d.step, d.stage));
  w.end_object();
}

void write_token_index(JsonWriter& w, const ReplayReport& r, const TokenIndexDiff& d) {
  w.begin_object();
  w.field("step", d.step).field("stage", kTokenIndexStage).field("rows", d.rows);
  w.field("set_equal_rows", d.set_equal_rows).field("tie_rows", d.tie_rows);
  w.field("real_mismatch_rows", d.real_mismatch_rows).field("count_mismatches", d.count_mismatches);
  w.field("first_bad_row", d.first_bad_row);
  w.field("verdict", to_string(verdict(d))).field("pass", d.pass);
  if (!d.pass) w.field("repro", repro_command(r, d.step, kTokenIndexStage));
  w.end_object();
}

}  // namespace

std::string to_json(const ReplayReport& r) {
  JsonWriter w;
  w.begin_object();
  w.field("trace", r.trace_path).field("backend", r.backend).field("mode", r.mode).field("seed", r.seed);
  w.field("pass", r.pass()).field("compared", r.compared()).field("failed", r.failed());
  w.field("summary", report_detail::summary_line(r));
  w.key("tensors").begin_array();
  for (const auto& d : r.tensors) write_tensor(w, r, d);
  w.end_array();
  w.key("selections").begin_array();
  for (const auto& d : r.selections) write_selection(w, r, d);
  w.end_array();
  w.key("token_indices").begin_array();
  for (const auto& d : r.token_indices) write_token_index(w, r, d);
  w.end_array();
  w.key("failures").begin_array();
  for (const auto& f : report_detail::failures(r)) {
    w.begin_object().field("what", f.what).field("repro", f.repro).end_object();
  }
  w.end_array();
  w.key("notes").begin_array();
  for (const auto& n : r.notes) w.value(n);
  w.end_array();
  w.end_object();
  return w.str();
}

}  // namespace qsa
