// `qsa inspect`: what a trace holds — config, steps, shapes, dtypes, sizes
// and which stages were recorded — as text or --json; with --selections also
// how much neighbouring rows' recorded selections overlap
// (harness/selection_locality.hpp).
#include <fmt/format.h>

#include <map>

#include "harness/cli/commands.hpp"
#include "harness/compare/json_writer.hpp"
#include "harness/selection_locality.hpp"
#include "harness/trace/decode_guard.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa::cli {

namespace {

struct InspectArgs {
  std::string trace;
  bool json = false;
  bool selections = false;
  std::vector<int> tile_rows{2, 4, 8, 16};
};

struct StepInfo {
  std::string name;
  int reqs = 0;
  int64_t rows = 0, real = 0;
  bool mtp = false;
  std::vector<std::string> recorded;  // output dataset names
  std::string selections_from;        // with --selections: "token_idx", "block_ids" or "" (neither recorded)
  SelectionLocality locality;
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

void write_locality_json(JsonWriter& w, const SelectionLocality& l) {
  w.field("rows", l.rows).field("ids_per_row", l.ids_per_row()).field("pairs", l.pairs).key("jaccard");
  if (l.pairs > 0)
    w.value(l.jaccard());
  else
    w.null();
  w.key("tiles").begin_array();
  for (const TileReuse& t : l.tiles) {
    w.begin_object().field("rows", t.rows).field("tiles", t.tiles).field("reuse", t.reuse());
    w.field("useful", t.useful()).end_object();
  }
  w.end_array();
}

std::string locality_columns(const SelectionLocality& l) {
  std::string line = fmt::format("{:>7} {:>8.1f} {:>8}", l.rows, l.ids_per_row(),
                                 l.pairs > 0 ? fmt::format("{:.3f}", l.jaccard()) : std::string("-"));
  for (const TileReuse& t : l.tiles) line += fmt::format(" {:>5.2f}x {:>4.0f}%", t.reuse(), 100.0 * t.useful());
  return line;
}

void print_locality(const std::vector<StepInfo>& steps, const SelectionLocality& total,
                    const std::vector<int>& tile_rows) {
  fmt::print(
      "\nselection locality, from each step's recorded token_idx, else its block_ids (docs/cli.md):\n"
      "  jaccard  mean shared / combined ids of neighbouring rows of one request\n"
      "  R=n      tiles of n consecutive rows of one request: reuse = ids a row-by-row gather loads per id of\n"
      "           the tiles' unions; useful = share of a union-tile kernel's (row, id) pairs the row attends\n");
  std::string head =
      fmt::format("{:>5}  {:<30} {:<9} {:>7} {:>8} {:>8}", "step", "name", "from", "rows", "ids/row", "jaccard");
  for (const int r : tile_rows) head += fmt::format(" {:>12}", fmt::format("R={}", r));
  fmt::print("{}\n", head);
  bool any = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].selections_from.empty()) continue;
    any = true;
    fmt::print("{:>5}  {:<30} {:<9} {}\n", i, steps[i].name.substr(0, 30), steps[i].selections_from,
               locality_columns(steps[i].locality));
  }
  if (!any) {
    fmt::print("(no step recorded token_idx or block_ids)\n");
    return;
  }
  fmt::print("{:>5}  {:<30} {:<9} {}\n", "all", "", "", locality_columns(total));
}

int run_inspect(const InspectArgs& a) {
  TraceReadOptions ro;
  ro.load_outputs = a.selections;  // only token_idx or block_ids are used, but the reader loads every output
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
    if (a.selections) {
      // The token ids attention reads where recorded (the K/V a union tile
      // loads), else the blocks they come from.
      if (!s.recorded.token_idx.empty()) {
        steps[i].selections_from = "token_idx";
        steps[i].locality =
            selection_locality(counted_token_ids(s.recorded.token_idx, t.config.count_column), s.meta.query_start_loc,
                               a.tile_rows);
      } else if (!s.recorded.block_ids.empty()) {
        steps[i].selections_from = "block_ids";
        steps[i].locality = selection_locality(s.recorded.block_ids, s.meta.query_start_loc, a.tile_rows);
      }
    }
  }
  SelectionLocality total;
  for (const StepInfo& s : steps)
    if (!s.selections_from.empty()) total.add(s.locality);
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
    w.end_array();
    if (a.selections) {
      w.key("selections").begin_object().key("steps").begin_array();
      for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].selections_from.empty()) continue;
        w.begin_object().field("index", static_cast<int64_t>(i)).field("name", steps[i].name);
        w.field("from", steps[i].selections_from);
        write_locality_json(w, steps[i].locality);
        w.end_object();
      }
      w.end_array().key("total").begin_object();
      write_locality_json(w, total);
      w.end_object().end_object();
    }
    w.end_object();
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
  if (a.selections) print_locality(steps, total, a.tile_rows);
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
  CLI::Option* selections =
      cmd->add_flag("--selections", a->selections,
                    "also how much neighbouring rows' recorded selections overlap (loads the recorded outputs)");
  cmd->add_option("--tile-rows", a->tile_rows, "tile heights R for --selections")
      ->needs(selections)
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->callback([a, &ctx] { ctx.exit_code = run_inspect(*a); });
}

}  // namespace qsa::cli
