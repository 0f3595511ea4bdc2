#include "harness/stage_summary.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace qsa {

namespace {

template <class T>
StageSummary summarize(const std::string& stage, const Tensor<T>& x, int64_t rows) {
  StageSummary s;
  s.stage = stage;
  s.shape = shape_to_string(x.shape);
  if (x.empty()) return s;
  const int64_t per_row = x.numel() / x.dim(0);
  const int64_t n = std::min<int64_t>(rows, x.dim(0)) * per_row;
  double sum_abs = 0, sum_sq = 0;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -s.min;
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x.data[i]);
    if (!std::isfinite(v)) {
      ++s.non_finite;
      continue;
    }
    ++s.count;
    sum_abs += std::fabs(v);
    sum_sq += v * v;
    s.checksum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  if (s.count > 0) {
    const auto count = static_cast<double>(s.count);
    s.mean_abs = sum_abs / count;
    s.rms = std::sqrt(sum_sq / count);
  } else {
    s.min = s.max = 0;
  }
  return s;
}

}  // namespace

std::vector<StageSummary> summarize_step(const StepOutputs& o) {
  const int64_t n = o.layout.num_valid_tokens;
  return {
      summarize("index_q", o.index_q, n),
      summarize("raw_keys", o.raw_keys, n),
      summarize("compressed_rows", o.compressed.keys, o.compressed.keys.empty() ? 0 : o.compressed.keys.dim(0)),
      summarize("block_ids", o.block_ids, n),
      summarize("block_scores", o.block_scores, n),
      summarize("token_idx", o.token_idx, n),
      summarize("q", o.q, n),
      summarize("k", o.k, n),
      summarize("v", o.v, n),
      summarize("gate", o.gate, n),
      summarize("attn", o.attn, n),
      summarize("gated", o.gated, n),
      summarize("out", o.out, n),
  };
}

std::string describe_selection(const StepOutputs& o, bool count_column) {
  const int64_t n = o.layout.num_valid_tokens;
  if (n == 0) return "no real rows";
  double blocks = 0, tokens = 0;
  const int64_t kb = o.block_ids.dim(1), w = o.token_idx.dim(1);
  const int64_t id_cols = count_column ? w - 1 : w;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < kb && o.block_ids.at(t, j) >= 0; ++j) blocks += 1;
    for (int64_t j = 0; j < id_cols; ++j) tokens += o.token_idx.at(t, j) >= 0 ? 1 : 0;
  }
  return fmt::format("{} rows: mean {:.1f} of {} blocks selected, mean {:.1f} tokens attended{}", n,
                     blocks / static_cast<double>(n), kb, tokens / static_cast<double>(n), o.layout.mtp_reuse ? " (MTP reuse of step-0 rows)" : "");
}

std::string format_summaries(const std::vector<StageSummary>& rows) {
  std::string out = fmt::format("  {:<16} {:<16} {:>9} {:>7} {:>11} {:>11} {:>11} {:>11} {:>15}\n", "stage",
                                "shape", "count", "nonfin", "mean|x|", "rms", "min", "max", "checksum");
  for (const auto& r : rows)
    out += fmt::format("  {:<16} {:<16} {:>9} {:>7} {:>11.4g} {:>11.4g} {:>11.4g} {:>11.4g} {:>15.9g}\n",
                       r.stage, r.shape, r.count, r.non_finite, r.mean_abs, r.rms, r.min, r.max, r.checksum);
  return out;
}

}  // namespace qsa
