// `qsa inspect`: what a trace holds — config, steps, shapes, dtypes, sizes
// and which stages were recorded — as text or --json.
#include <fmt/format.h>

#include <map>

#include "harness/cli/commands.hpp"
#include "harness/compare/json_writer.hpp"
#include "harness/trace/decode_guard.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa::cli {

namespace {

struct InspectArgs {
  std::string trace;
  bool json = false;
};

struct StepInfo {
  std::string name;
  int reqs = 0;
  int64_t rows = 0, real = 0;
  bool mtp = false;
  std::vector<std::string> recorded;  // output dataset names
};

// "/steps/000003/outputs/q" -> step 3, "q".
bool parse_output_path(const std::string& p, size_t& step, std::string& name) {
  const std::string prefix = "/steps/";
  const auto out = p.find("/outputs/");
  if (p.rfind(prefix, 0) != 0 || out == std::string::npos) return false;
  step = std::stoul(p.substr(prefix.size(), out - prefix.size()));
  name = p.substr(out + 9);
  return true;
}

int run_inspect(const InspectArgs& a) {
  TraceReadOptions ro;
  ro.load_outputs = false;
  decode_in_child_first(a.trace, [&] {
    read_trace(a.trace, ro);
    list_datasets(a.trace);
  });
  const Trace t = read_trace(a.trace, ro);
  const std::vector<DatasetInfo> datasets = list_datasets(a.trace);
  std::vector<StepInfo> steps(t.steps.size());
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const TraceStep& s = t.steps[i];
    steps[i].name = s.name;
    steps[i].reqs = static_cast<int>(s.meta.seq_lens.size());
    steps[i].rows = s.hidden.dim(0);
    steps[i].real = s.meta.query_start_loc.back();
    steps[i].mtp = s.meta.mtp_reuse;
  }
  int64_t stored = 0;
  for (const auto& d : datasets) {
    stored += d.stored_bytes;
    size_t step;
    std::string name;
    if (parse_output_path(d.path, step, name) && step < steps.size()) steps[step].recorded.push_back(name);
  }
  if (a.json) {
    JsonWriter w;
    w.begin_object().field("file", a.trace).field("schema_version", t.schema_version).field("producer", t.producer);
    w.field("producer_version", t.producer_version).field("seed", t.seed).field("description", t.description);
    w.key("config").begin_object();
    for (const auto& line : split_config(describe_config(t.config))) w.field(line.first, line.second);
    w.end_object();
    w.key("geometry").begin_object().field("num_pages", t.geometry.num_pages);
    w.field("num_ring_blocks", t.geometry.num_ring_blocks).end_object();
    w.field("num_steps", static_cast<int64_t>(steps.size())).field("stored_bytes", stored);
    w.key("steps").begin_array();
    for (size_t i = 0; i < steps.size(); ++i) {
      w.begin_object().field("index", static_cast<int64_t>(i)).field("name", steps[i].name);
      w.field("requests", steps[i].reqs).field("rows", steps[i].rows).field("real_rows", steps[i].real);
      w.field("mtp_reuse", steps[i].mtp).key("recorded").begin_array();
      for (const auto& r : steps[i].recorded) w.value(r);
      w.end_array().end_object();
    }
    w.end_array().key("datasets").begin_array();
    for (const auto& d : datasets) {
      w.begin_object().field("path", d.path).field("shape", shape_to_string(d.shape));
      w.field("dtype", d.dtype).field("stored_bytes", d.stored_bytes).end_object();
    }
    w.end_array().end_object();
    fmt::print("{}\n", w.str());
    return 0;
  }
  fmt::print("trace '{}': schema v{}, {} ({}), seed {}\n", a.trace, t.schema_version, t.producer, t.producer_version,
             t.seed);
  if (!t.description.empty()) fmt::print("{}\n", t.description);
  fmt::print("\n{}geometry: {} pages, {} ring blocks; {} datasets, {:.2f} MiB stored\n\n", describe_config(t.config),
             t.geometry.num_pages, t.geometry.num_ring_blocks, datasets.size(), static_cast<double>(stored) / (1 << 20));
  fmt::print("{:>5}  {:<34} {:>4} {:>7} {:>7} {:>4}  {}\n", "step", "name", "reqs", "rows", "real", "mtp", "recorded");
  for (size_t i = 0; i < steps.size(); ++i) {
    std::string rec;
    for (const auto& r : steps[i].recorded) rec += (rec.empty() ? "" : " ") + r;
    fmt::print("{:>5}  {:<34} {:>4} {:>7} {:>7} {:>4}  {}\n", i, steps[i].name.substr(0, 34), steps[i].reqs,
               steps[i].rows, steps[i].real, steps[i].mtp ? "yes" : "", rec.empty() ? "(inputs only)" : rec);
  }
  return 0;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> split_config(const std::string& described) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start < described.size()) {
    const size_t end = described.find('\n', start);
    const std::string line = described.substr(start, end - start);
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos) {
      std::string key = line.substr(0, eq);
      key.erase(key.find_last_not_of(' ') + 1);
      key.erase(0, key.find_first_not_of(' '));
      out.emplace_back(key, line.substr(eq + 3));
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

void add_inspect_command(CLI::App& app, CommandContext& ctx) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "show a trace's config, steps, shapes, dtypes and recorded stages");
  cmd->add_option("trace", a->trace, "trace file")->required();
  cmd->add_flag("--json", a->json, "machine-readable output");
  cmd->callback([a, &ctx] { ctx.exit_code = run_inspect(*a); });
}

}  // namespace qsa::cli
