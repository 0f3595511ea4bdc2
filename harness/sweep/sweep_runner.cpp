#include "harness/sweep/sweep_runner.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/atomic_file.hpp"
#include "harness/sweep/sweep_json.hpp"
#include "harness/sweep/sweep_point.hpp"
#include "harness/sweep/sweep_table.hpp"
#include "reference/core/errors.hpp"

namespace qsa {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifestName = "manifest.txt";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(fmt::format("cannot read '{}'", path));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::pair<std::string, std::string>> manifest_entries(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find(" = ");
    if (eq != std::string::npos) out.emplace_back(line.substr(0, eq), line.substr(eq + 3));
  }
  return out;
}

// The first setting that differs, in words.
std::string manifest_difference(const std::string& old_text, const std::string& new_text) {
  const auto a = manifest_entries(old_text), b = manifest_entries(new_text);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size()) return fmt::format("{} is new in this run ({})", b[i].first, b[i].second);
    if (i >= b.size()) return fmt::format("{} = {} is missing from this run", a[i].first, a[i].second);
    if (a[i] != b[i])
      return a[i].first == b[i].first ? fmt::format("{} was {}, now {}", a[i].first, a[i].second, b[i].second)
                                      : fmt::format("{} there, {} here", a[i].first, b[i].first);
  }
  return "the manifests differ";
}

// Removes what a previous sweep left in the parts folder: its manifest and
// parts (files this code names), nothing else.
void clear_parts(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool ours = name == kManifestName || (name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0) ||
                      name.find(".csv.tmp-") != std::string::npos;
    if (ours && e.is_regular_file()) fs::remove(e.path());
  }
}

// Decides between a fresh start, a resume and an error (sweep_runner.hpp).
void prepare_parts(const std::string& dir, const std::string& manifest, const std::vector<std::string>& outputs,
                   bool force) {
  const std::string path = dir + "/" + kManifestName;
  if (fs::exists(path)) {
    const std::string old = read_file(path);
    if (old == manifest) return;
    if (!force)
      throw ConfigError(
          fmt::format("'{}' holds another sweep ({}); rerun with its arguments to resume it, or pass "
                      "--force to discard its parts and start over",
                      dir, manifest_difference(old, manifest)));
    clear_parts(dir);
  } else if (!force) {
    for (const std::string& out : outputs)
      if (!out.empty() && fs::exists(out))
        throw IoError(
            fmt::format("'{}' exists and '{}' holds no sweep to resume; pass --force to replace it", out, path));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("cannot create the folder '{}': {}", dir, ec.message()));
  write_file_atomically(path, manifest, true);
}

std::string seconds(double s) { return s < 120 ? fmt::format("{:.1f} s", s) : fmt::format("{:.1f} min", s / 60); }

}  // namespace

std::string sweep_output_prefix(const std::string& output) {
  if (output.empty()) throw ConfigError("-o OUT is required: results go to OUT.csv, OUT.json and OUT.parts/");
  if (output.size() > 4 && output.compare(output.size() - 4, 4, ".csv") == 0)
    return output.substr(0, output.size() - 4);
  return output;
}

std::string sweep_manifest(const std::vector<SweepTrace>& inputs, const SweepSettings& s, const SweepPlan& plan) {
  std::string out =
      fmt::format("# qsa sweep manifest: a resumed sweep must match every line\nversion = {}\n", kQsaVersion);
  for (size_t i = 0; i < inputs.size(); ++i)
    out += fmt::format("trace[{}] = {} ({})\n", i, inputs[i].label, inputs[i].identity);
  for (const auto& [k, v] : describe_sweep_settings(s)) out += fmt::format("{} = {}\n", k, v);
  // What the settings planned, so parts made by a build that planned
  // differently are not mixed in.
  for (size_t i = 0; i < plan.rows.size(); ++i) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const ScoredRow& r : plan.rows[i])
      for (int64_t x : {int64_t{r.step}, r.row, r.pos, int64_t{r.bucket}})
        h = (h ^ static_cast<uint64_t>(x)) * 0x100000001b3ULL;
    out += fmt::format("rows[{}] = {} rows, fnv1a64={:016x}\n", i, plan.rows[i].size(), h);
  }
  for (const SweepPoint& p : plan.points)
    out += fmt::format("point = {} budgets {}\n", p.key, fmt::join(p.budgets, ","));
  return out;
}

SweepSummary run_sweep(const std::vector<SweepTrace>& inputs, SweepSettings s, const SweepRunOptions& o) {
  canonicalize_sweep_settings(s);
  s.per_row = !o.per_row_path.empty();
  const SweepPlan plan = plan_sweep(inputs, s);
  const std::string prefix = sweep_output_prefix(o.output);
  SweepSummary sum;
  sum.csv_path = prefix + ".csv";
  sum.json_path = prefix + ".json";
  sum.parts_dir = prefix + ".parts";
  sum.points = static_cast<int>(plan.points.size());
  sum.notes = plan.notes;
  prepare_parts(sum.parts_dir, sweep_manifest(inputs, s, plan), {sum.csv_path, sum.json_path, o.per_row_path}, o.force);
  for (const std::string& note : plan.notes) std::fprintf(stderr, "qsa sweep: note: %s\n", note.c_str());

  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const SweepPoint& pt = plan.points[i];
    const SweepTrace& in = inputs[static_cast<size_t>(pt.trace)];
    const std::vector<ScoredRow>& rows = plan.rows[static_cast<size_t>(pt.trace)];
    const std::string part = sum.parts_dir + "/" + pt.key + ".csv";
    const std::string where = fmt::format("[{}/{}] {} r={} indexer={}", i + 1, plan.points.size(), in.label, pt.ratio,
                                          to_string(pt.indexer_dtype));
    if (fs::exists(part)) {
      ++sum.resumed;
      if (o.progress) std::fprintf(stderr, "qsa sweep %s: done in an earlier run\n", where.c_str());
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const PointValues values = run_sweep_point(in, pt, rows, s);
    // The rows file first: a part's .csv is the mark that the point is done.
    if (s.per_row)
      write_file_atomically(sum.parts_dir + "/" + pt.key + ".rows.csv", per_row_csv(in.label, pt, rows, values), true);
    write_file_atomically(part, aggregate_csv(in.label, pt, rows, values), true);
    ++sum.computed;
    if (o.progress) {
      const auto now = std::chrono::steady_clock::now();
      const double took = std::chrono::duration<double>(now - t0).count();
      const double per_point = std::chrono::duration<double>(now - start).count() / sum.computed;
      const auto left = static_cast<double>(plan.points.size() - i - 1);
      std::fprintf(stderr, "qsa sweep %s: %zu rows in %s, ETA %s\n", where.c_str(), rows.size(), seconds(took).c_str(),
                   seconds(per_point * left).c_str());
    }
    if (o.point_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.point_delay_ms));
  }

  std::string csv = std::string(kSweepCsvHeader) + "\n", rows_csv = std::string(kSweepRowsCsvHeader) + "\n";
  for (const SweepPoint& pt : plan.points) {
    const std::string body = read_file(sum.parts_dir + "/" + pt.key + ".csv");
    for (char ch : body) sum.csv_lines += ch == '\n';
    csv += body;
    if (s.per_row) rows_csv += read_file(sum.parts_dir + "/" + pt.key + ".rows.csv");
  }
  write_file_atomically(sum.csv_path, csv, true);
  if (s.per_row) write_file_atomically(o.per_row_path, rows_csv, true);
  write_file_atomically(sum.json_path, sweep_json(inputs, s, plan, csv, o.command_line, prefix, o.per_row_path), true);
  return sum;
}

}  // namespace qsa
