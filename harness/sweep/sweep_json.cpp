#include "harness/sweep/sweep_json.hpp"

#include <cstdlib>
#include <sstream>

#include "harness/compare/json_writer.hpp"
#include "harness/sweep/sweep_runner.hpp"
#include "harness/sweep/sweep_table.hpp"

namespace qsa {

namespace {

// describe_config's "name = value" lines as one object.
void config_object(JsonWriter& j, const QsaConfig& c) {
  j.begin_object();
  std::istringstream in(describe_config(c));
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    std::string name = line.substr(0, eq);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    j.field(name, line.substr(eq + 3));
  }
  j.end_object();
}

template <class T, class Name>
void array(JsonWriter& j, const char* key, const std::vector<T>& v, Name name) {
  j.key(key).begin_array();
  for (const T& x : v) j.value(name(x));
  j.end_array();
}

void settings_object(JsonWriter& j, const SweepSettings& s) {
  j.key("settings").begin_object();
  array(j, "budgets", s.axes.budgets, [](int b) { return b; });
  array(j, "ratios", s.axes.ratios, [](int r) { return r; });
  array(j, "kv_dtypes", s.axes.kv_dtypes, [](KvDtype d) { return to_string(d); });
  array(j, "indexer_dtypes", s.axes.indexer_dtypes, [](IndexerDtype d) { return to_string(d); });
  array(j, "policies", s.axes.policies, [](SweepPolicy p) { return to_string(p); });
  j.field("rows", to_string(s.rows)).field("seed", s.seed).field("window_sinks", s.window_sinks);
  for (const auto& [name, v] :
       {std::pair{"octave_window", s.octave_window}, std::pair{"octave_sinks", s.octave_sinks}}) {
    if (v < 0)
      j.field(name, "trace's config");
    else
      j.field(name, v);
  }
  j.field("per_row", s.per_row);
  j.end_object();
}

// Numeric CSV columns (n, statistics, ratio, budget) back as numbers.
void aggregates(JsonWriter& j, const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> columns = parse_csv_line(line);
  j.key("aggregates").begin_array();
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = parse_csv_line(line);
    j.begin_object();
    for (size_t i = 0; i < columns.size() && i < cells.size(); ++i) {
      const std::string& c = columns[i];
      if (c == "ratio" || c == "budget" || c == "n")
        j.field(c, static_cast<int64_t>(std::strtoll(cells[i].c_str(), nullptr, 10)));
      else if (i >= 9)
        j.field(c, std::strtod(cells[i].c_str(), nullptr));
      else
        j.field(c, cells[i]);
    }
    j.end_object();
  }
  j.end_array();
}

}  // namespace

std::string sweep_json(const std::vector<SweepTrace>& inputs, const SweepSettings& s, const SweepPlan& plan,
                       const std::string& csv, const std::string& command_line, const std::string& prefix,
                       const std::string& per_row_path) {
  JsonWriter j;
  j.begin_object();
  j.field("qsa_version", kQsaVersion);
  j.field("command_line", command_line);
  j.key("outputs").begin_object();
  j.field("csv", prefix + ".csv").field("json", prefix + ".json").field("parts", prefix + ".parts");
  if (!per_row_path.empty()) j.field("per_row", per_row_path);
  j.end_object();
  settings_object(j, s);
  j.key("method").begin_object();
  j.field("driver",
          "each point reruns the trace's steps with its ratio and indexer dtype, the largest swept budget "
          "the ratio divides, bf16 KV and the exact precision profile (fp64, no rounding)");
  j.field("reference", "dense causal fp64 attention over tokens 0..p with the exact K/V the driver cached");
  j.field("kv_dtypes",
          "applied as an engine's cache stores them: bf16 rounded; fp8(x / scale); Octave of the bf16 "
          "value with exact bf16 copies of the window and sink tokens");
  j.field("rows", "real rows of selecting (non MTP-reuse) steps with p + 1 >= the largest swept ratio of the trace");
  j.field("buckets", "all; q1..q4: (p + 1) / final length of the request in (0, .25], (.25, .5], (.5, .75], (.75, 1]");
  j.field("percentiles", "linear interpolation between order statistics");
  j.end_object();
  j.key("traces").begin_array();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Trace& t = inputs[i].trace;
    j.begin_object();
    j.field("label", inputs[i].label).field("identity", inputs[i].identity);
    j.field("producer", t.producer).field("producer_version", t.producer_version).field("seed", t.seed);
    j.field("description", t.description);
    j.field("steps", static_cast<int64_t>(t.steps.size()));
    j.field("scored_rows", static_cast<int64_t>(plan.rows[i].size()));
    j.key("config");
    config_object(j, t.config);
    j.end_object();
  }
  j.end_array();
  j.key("points").begin_array();
  for (const SweepPoint& p : plan.points) {
    j.begin_object();
    j.field("trace", inputs[static_cast<size_t>(p.trace)].label).field("ratio", p.ratio);
    j.field("indexer_dtype", to_string(p.indexer_dtype)).field("part", p.key + ".csv");
    j.key("budgets").begin_array();
    for (int b : p.budgets) j.value(b);
    j.end_array();
    j.end_object();
  }
  j.end_array();
  j.key("notes").begin_array();
  for (const std::string& n : plan.notes) j.value(n);
  j.end_array();
  aggregates(j, csv);
  j.end_object();
  return j.str() + "\n";
}

}  // namespace qsa
