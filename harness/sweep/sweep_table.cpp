#include "harness/sweep/sweep_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace qsa {

namespace {

// The key columns shared by aggregate and per-row lines.
std::string key_fields(const std::string& label, const SweepPoint& pt, const SeriesKey& k) {
  return fmt::format("{},{},{},{},{},{},{}", csv_field(label), k.policy, pt.ratio, k.budget, k.kv_dtype,
                     to_string(pt.indexer_dtype), k.metric);
}

}  // namespace

double percentile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = at - static_cast<double>(lo);
  // Equal neighbours (and infinities) must not turn into NaN through 0·inf.
  if (frac == 0 || sorted[lo] == sorted[hi]) return sorted[lo];
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

SweepStats summarize(std::vector<double> v) {
  SweepStats s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  if (std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.mean = s.median = s.p5 = s.p95 = s.min = s.max = nan;
    return s;
  }
  double sum = 0;
  for (double x : v) sum += x;  // in row order: the same for any thread count
  s.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  s.median = percentile(v, 0.5);
  s.p5 = percentile(v, 0.05);
  s.p95 = percentile(v, 0.95);
  s.min = v.front();
  s.max = v.back();
  return s;
}

std::string bucket_name(int bucket) { return fmt::format("q{}", bucket + 1); }

std::string aggregate_csv(const std::string& label, const SweepPoint& pt, const std::vector<ScoredRow>& rows,
                          const PointValues& values) {
  std::string out;
  for (size_t s = 0; s < values.series.size(); ++s) {
    const int w = values.width(s);
    const std::string key = key_fields(label, pt, values.series[s]);
    for (int bucket = -1; bucket < kPositionBuckets; ++bucket) {
      std::vector<double> pool;
      for (size_t r = 0; r < rows.size(); ++r) {
        if (bucket >= 0 && rows[r].bucket != bucket) continue;
        const double* x = &values.values[s][r * static_cast<size_t>(w)];
        pool.insert(pool.end(), x, x + w);
      }
      if (pool.empty()) continue;
      const SweepStats st = summarize(std::move(pool));
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", key, bucket < 0 ? std::string("all") : bucket_name(bucket),
                         st.n, csv_number(st.mean), csv_number(st.median), csv_number(st.p5), csv_number(st.p95),
                         csv_number(st.min), csv_number(st.max));
    }
  }
  return out;
}

std::string per_row_csv(const std::string& label, const SweepPoint& pt, const std::vector<ScoredRow>& rows,
                        const PointValues& values) {
  std::string out;
  for (size_t s = 0; s < values.series.size(); ++s) {
    const int w = values.width(s);
    const std::string key = key_fields(label, pt, values.series[s]);
    for (size_t r = 0; r < rows.size(); ++r)
      for (int h = 0; h < w; ++h)
        out += fmt::format("{},{},{},{},{},{}\n", key, rows[r].step, rows[r].row, rows[r].pos,
                           values.series[s].per_head ? h : -1,
                           csv_number(values.values[s][r * static_cast<size_t>(w) + static_cast<size_t>(h)]));
  }
  return out;
}

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

std::vector<std::string> parse_csv_line(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        out.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else {
      out.back() += ch;
    }
  }
  return out;
}

}  // namespace qsa
