#include "harness/sweep/sweep_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>

#include "reference/core/errors.hpp"

namespace qsa {

namespace {

// A readable, file-name-safe stem of a trace label ("data/hf-fp32.h5" ->
// "hf-fp32"); the trace index in front keeps keys unique.
std::string label_stem(const std::string& label) {
  std::string base = label.substr(label.find_last_of('/') + 1);
  if (base.size() > 3 && base.compare(base.size() - 3, 3, ".h5") == 0) base.resize(base.size() - 3);
  std::string out;
  for (char ch : base) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ? ch : '_';
  return out.substr(0, 40);
}

bool snapshot_has_side_caches(const CacheSnapshot& s) { return !s.ring_slots.empty() || !s.comp_slots.empty(); }

void check_kv_dtypes(const SweepTrace& in, const SweepSettings& s) {
  const QsaConfig& c = in.trace.config;
  for (KvDtype d : s.axes.kv_dtypes) {
    if (d == KvDtype::kBf16 || d == KvDtype::kFp8) continue;
    try {
      (void)octave_layout(octave_format(d), c.head_dim, c.rotary_dim);
    } catch (const ConfigError& e) {
      throw ConfigError(
          fmt::format("--kv-dtypes {} cannot encode trace '{}' (head_dim {}, rotary_dim {}): {}; drop "
                      "it from --kv-dtypes or sweep that trace separately",
                      to_string(d), in.label, c.head_dim, c.rotary_dim, e.what()));
    }
  }
}

// Points of one trace, in output order (ratio, then indexer dtype as given).
void plan_points(const SweepTrace& in, int index, const SweepSettings& s, SweepPlan& plan) {
  const QsaConfig& c = in.trace.config;
  const size_t before = plan.points.size();
  for (int r : s.axes.ratios) {
    if (c.page_size % r != 0) {
      plan.notes.push_back(
          fmt::format("trace '{}': ratio {} skipped: it does not divide the page size {}", in.label, r, c.page_size));
      continue;
    }
    // The ring must divide the page (spec section 4) and hold r + S tokens.
    const int ring = r * ((r + c.speculative_tokens + r - 1) / r);
    if (ring > c.page_size) {
      plan.notes.push_back(
          fmt::format("trace '{}': ratio {} skipped: with {} speculative tokens its raw-key ring "
                      "needs {} slots, more than the page size {}",
                      in.label, r, c.speculative_tokens, ring, c.page_size));
      continue;
    }
    std::vector<int> budgets, skipped;
    for (int b : s.axes.budgets) (b % r == 0 ? budgets : skipped).push_back(b);
    if (!skipped.empty())
      plan.notes.push_back(fmt::format("trace '{}', ratio {}: budgets {} skipped: not divisible by the ratio", in.label,
                                       r, fmt::join(skipped, ",")));
    if (budgets.empty()) continue;
    for (IndexerDtype d : s.axes.indexer_dtypes) {
      // A snapshot's ring and compressed rows were laid out for the trace's
      // own ratio and indexer dtype; another one cannot reuse them.
      if (snapshot_has_side_caches(in.trace.initial_state) && (r != c.compress_ratio || d != c.indexer_dtype)) {
        plan.notes.push_back(
            fmt::format("trace '{}': ratio {} with indexer dtype {} skipped: its initial cache "
                        "state was recorded for ratio {} and indexer dtype {}",
                        in.label, r, to_string(d), c.compress_ratio, to_string(c.indexer_dtype)));
        continue;
      }
      SweepPoint p;
      p.trace = index;
      p.ratio = r;
      p.indexer_dtype = d;
      p.budgets = budgets;
      p.key = fmt::format("t{}-{}-r{}-{}", index, label_stem(in.label), r, to_string(d));
      validate_config(point_config(c, p));
      plan.points.push_back(std::move(p));
    }
  }
  if (plan.points.size() == before)
    throw ConfigError(
        fmt::format("trace '{}' (page size {}) admits no swept (ratio, budget) combination: a ratio "
                    "must divide the page size and at least one budget",
                    in.label, c.page_size));
}

struct Candidate {
  ScoredRow row;
  int32_t request;  // ring block
};

std::vector<ScoredRow> choose_rows(const SweepTrace& in, int max_ratio, const RowSpec& spec) {
  const Trace& t = in.trace;
  std::vector<StepLayout> layouts;
  std::map<int32_t, int64_t> final_len;
  for (const TraceStep& s : t.steps) {
    layouts.push_back(derive_step_layout(t.config, t.geometry, s.meta));
    const StepLayout& l = layouts.back();
    for (int i = 0; i < l.num_reqs; ++i)
      final_len[l.ring_blocks[i]] = std::max<int64_t>(final_len[l.ring_blocks[i]], l.seq_lens[i]);
  }
  std::vector<Candidate> eligible;
  for (size_t s = 0; s < layouts.size(); ++s) {
    const StepLayout& l = layouts[s];
    if (l.mtp_reuse) continue;
    for (int64_t row = 0; row < l.num_valid_tokens; ++row) {
      const int64_t p = l.pos[row];
      if (p + 1 < max_ratio) continue;
      const int32_t req = l.ring_blocks[l.token_to_req[row]];
      const int64_t len = final_len[req];
      int bucket = 0;
      while (bucket + 1 < kPositionBuckets && kPositionBuckets * (p + 1) > (bucket + 1) * len) ++bucket;
      eligible.push_back({{static_cast<int>(s), row, p, bucket}, req});
    }
  }
  std::vector<ScoredRow> out;
  if (spec.mode == RowMode::kAll || spec.mode == RowMode::kEvery) {
    for (size_t i = 0; i < eligible.size(); i += static_cast<size_t>(spec.every)) out.push_back(eligible[i].row);
    return out;
  }
  // Per request and fraction, the eligible row nearest f·(L_final - 1); the
  // first in trace order on a tie. Two fractions may land on one row.
  std::vector<size_t> picked;
  for (const auto& [req, len] : final_len) {
    for (double f : spec.fractions) {
      const double target = f * static_cast<double>(len - 1);
      size_t best = eligible.size();
      double best_dist = 0;
      for (size_t i = 0; i < eligible.size(); ++i) {
        if (eligible[i].request != req) continue;
        const double dist = std::abs(static_cast<double>(eligible[i].row.pos) - target);
        if (best == eligible.size() || dist < best_dist) {
          best = i;
          best_dist = dist;
        }
      }
      if (best < eligible.size()) picked.push_back(best);
    }
  }
  std::sort(picked.begin(), picked.end());
  picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
  for (size_t i : picked) out.push_back(eligible[i].row);
  return out;
}

}  // namespace

std::string file_identity(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(fmt::format("cannot read '{}' to checksum it", path));
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  uint64_t bytes = 0;
  std::vector<char> buf(size_t{1} << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(f.gcount());
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 0x100000001b3ULL;
    }
    bytes += n;
  }
  return fmt::format("fnv1a64={:016x} bytes={}", h, bytes);
}

QsaConfig point_config(const QsaConfig& trace_config, const SweepPoint& point) {
  QsaConfig c = trace_config;
  c.compress_ratio = point.ratio;
  c.budget = point.budgets.back();
  c.indexer_dtype = point.indexer_dtype;
  c.kv_dtype = KvDtype::kBf16;
  apply_profile(c, PrecisionProfile::kExact);
  return c;
}

SweepPlan plan_sweep(const std::vector<SweepTrace>& inputs, const SweepSettings& s) {
  if (inputs.empty()) throw ConfigError("no trace to sweep: give trace files or --gen-preset");
  SweepPlan plan;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_kv_dtypes(inputs[i], s);
    const size_t first = plan.points.size();
    plan_points(inputs[i], static_cast<int>(i), s, plan);
    int max_ratio = 1;
    for (size_t p = first; p < plan.points.size(); ++p) max_ratio = std::max(max_ratio, plan.points[p].ratio);
    plan.rows.push_back(choose_rows(inputs[i], max_ratio, s.rows));
    if (plan.rows.back().empty())
      throw ConfigError(
          fmt::format("trace '{}' has no row to score: none of its selecting rows sees a complete "
                      "block at ratio {} (p + 1 >= {})",
                      inputs[i].label, max_ratio, max_ratio));
  }
  return plan;
}

}  // namespace qsa
