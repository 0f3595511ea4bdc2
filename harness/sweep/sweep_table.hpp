// Aggregates of a point's values and their tidy CSV lines.
//
// One line per (trace, policy, ratio, budget, kv_dtype, indexer_dtype,
// metric, bucket): n, mean, median, p5, p95, min, max over the point's
// values (every scored row and head for per-head metrics). Buckets are "all"
// and q1..q4 of (p + 1) / final length; an empty bucket has no line.
// Percentiles interpolate linearly between order statistics (numpy's
// default); a NaN among the values makes every statistic NaN. Numbers are
// printed in the shortest form that reads back exactly, so the CSV carries
// the exact doubles the JSON does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/sweep/sweep_plan.hpp"
#include "harness/sweep/sweep_series.hpp"

namespace qsa {

inline constexpr const char* kSweepCsvHeader =
    "trace,policy,ratio,budget,kv_dtype,indexer_dtype,metric,bucket,n,mean,median,p5,p95,min,max";
inline constexpr const char* kSweepRowsCsvHeader =
    "trace,policy,ratio,budget,kv_dtype,indexer_dtype,metric,step,row,pos,head,value";

struct SweepStats {
  int64_t n = 0;
  double mean = 0, median = 0, p5 = 0, p95 = 0, min = 0, max = 0;
};
SweepStats summarize(std::vector<double> values);

// Linear interpolation at q in [0, 1] of ascending, non-empty values.
double percentile(const std::vector<double>& sorted, double q);

std::string bucket_name(int bucket);  // 0..3 -> q1..q4

// The point's aggregate lines (no header), in series then bucket order.
std::string aggregate_csv(const std::string& trace_label, const SweepPoint& point, const std::vector<ScoredRow>& rows,
                          const PointValues& values);

// Every value of the point, one line each (no header); head -1 for per-row metrics.
std::string per_row_csv(const std::string& trace_label, const SweepPoint& point, const std::vector<ScoredRow>& rows,
                        const PointValues& values);

std::string csv_field(std::string_view s);                       // quoted when it holds ',', '"' or a line break
std::string csv_number(double v);                                // shortest exact form; nan, inf, -inf
std::vector<std::string> parse_csv_line(std::string_view line);  // RFC 4180 quoting

}  // namespace qsa
