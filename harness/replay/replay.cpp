#include "harness/replay/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "harness/compare/compare.hpp"
#include "harness/replay/step_runner.hpp"
#include "reference/step_driver.hpp"

namespace qsa {

std::string to_string(ReplayMode mode) { return mode == ReplayMode::kChained ? "chained" : "isolated"; }

ReplayMode parse_replay_mode(const std::string& s) {
  if (s == "chained") return ReplayMode::kChained;
  if (s == "isolated") return ReplayMode::kIsolated;
  throw ConfigError(fmt::format("unknown replay mode '{}' (accepted: isolated, chained)", s));
}

void restore_initial_state(const CacheSnapshot& st, StepDriver& driver) {
  for (int64_t i = 0; i < st.kv_slots.numel(); ++i)
    driver.kv_cache().write(st.kv_slots.at(i), st.kv_positions.at(i), st.kv_k.row(i), st.kv_v.row(i));
  for (int64_t i = 0; i < st.ring_slots.numel(); ++i)
    driver.ring().write(st.ring_slots.at(i), st.ring_positions.at(i), st.ring_rope.row(i), st.ring_keys.row(i));
  for (int64_t i = 0; i < st.comp_slots.numel(); ++i)
    driver.compressed_cache().write(st.comp_slots.at(i), st.comp_blocks.at(i), st.comp_keys.row(i));
}

namespace {

const std::vector<std::string> kHeadDims = {"row", "head", "dim"};
const std::vector<std::string> kRowDims = {"row", "dim"};

// Compares one step's outputs with what the trace recorded, stage by stage.
class StepComparer {
 public:
  StepComparer(const Trace& trace, const ReplayOptions& o, ToleranceContext ctx, ReplayReport& report)
      : c_(trace.config), o_(o), ctx_(ctx), report_(report) {}

  void compare(int step, const StageRecord& rec, const StepOutputs& out) {
    step_ = step;
    mask_.assign(static_cast<size_t>(out.layout.num_tokens), false);
    for (int64_t t = 0; t < out.layout.num_valid_tokens; ++t) mask_[static_cast<size_t>(t)] = true;
    tensor("index_q", rec.index_q, out.index_q, kHeadDims);
    tensor("raw_keys", rec.raw_keys, out.raw_keys, kRowDims);
    compressed(rec, out);
    SelectionDiff sel;
    if (wanted("block_ids") && !rec.block_ids.empty()) {
      sel = compare_selection(rec.block_ids, rec.block_scores, out.block_ids, out.block_scores,
                              selection_tie_tolerance(c_, ctx_), &mask_);
      sel.step = step;
      report_.selections.push_back(sel);
      scores_where_ids_agree(rec, out);
    }
    if (wanted("token_idx") && !rec.token_idx.empty()) {
      TokenIndexDiff d = compare_token_index(rec.token_idx, out.token_idx, c_.count_column,
                                             sel.tie_rows.empty() ? nullptr : &sel.tie_rows, &mask_);
      d.step = step;
      report_.token_indices.push_back(d);
    }
    tensor("q", rec.q, out.q, kHeadDims);
    tensor("k", rec.k, out.k, kHeadDims);
    tensor("v", rec.v, out.v, kHeadDims);
    tensor("gate", rec.gate, out.gate, kHeadDims);
    tensor("attn", rec.attn, out.attn, kHeadDims);
    tensor("gated", rec.gated, out.gated, kHeadDims);
    tensor("out", rec.out, out.out, kRowDims);
  }

 private:
  bool wanted(const std::string& stage) const {
    return (o_.only_step < 0 || o_.only_step == step_) && (o_.only_stage.empty() || o_.only_stage == stage);
  }

  void tensor(const std::string& stage, const TensorD& rec, const TensorD& out, const std::vector<std::string>& dims,
              const std::vector<bool>* mask = nullptr) {
    if (!wanted(stage) || rec.empty()) return;
    TensorDiff d = compare_tensors(stage, rec, out, stage_tolerance(c_, stage, ctx_), dims, mask ? mask : &mask_);
    d.step = step_;
    report_.tensors.push_back(std::move(d));
  }

  // Compressed rows are matched by slot: a producer may write them in
  // another order.
  void compressed(const StageRecord& rec, const StepOutputs& out) {
    if (!wanted("comp_keys") || rec.comp_keys.empty()) return;
    std::map<int64_t, int64_t> mine;
    for (size_t i = 0; i < out.compressed.slot.size(); ++i) mine[out.compressed.slot[i]] = static_cast<int64_t>(i);
    const int64_t n = rec.comp_keys.dim(0);
    TensorD expected({n, c_.indexer_head_dim}), actual({n, c_.indexer_head_dim});
    std::vector<bool> found(static_cast<size_t>(n), false);
    int64_t missing = 0;
    for (int64_t i = 0; i < n; ++i) {
      auto it = mine.find(rec.comp_slots.at(i));
      std::copy_n(rec.comp_keys.row(i), c_.indexer_head_dim, expected.row(i));
      if (it == mine.end()) {
        ++missing;
        continue;
      }
      found[static_cast<size_t>(i)] = true;
      std::copy_n(out.compressed.keys.row(it->second), c_.indexer_head_dim, actual.row(i));
    }
    if (missing > 0 || static_cast<int64_t>(out.compressed.slot.size()) != n)
      report_.notes.push_back(fmt::format("step {}: the trace recorded {} compressed rows, the backend wrote {} ({} "
                                          "recorded slots not written)",
                                          step_, n, out.compressed.slot.size(), missing));
    tensor("comp_keys", expected, actual, {"row", "dim"}, &found);
  }

  // Scores are comparable only where both sides picked the same blocks.
  void scores_where_ids_agree(const StageRecord& rec, const StepOutputs& out) {
    if (rec.block_scores.empty() || !wanted("block_scores")) return;
    std::vector<bool> same = mask_;
    for (int64_t t = 0; t < rec.block_ids.dim(0); ++t)
      for (int64_t j = 0; j < rec.block_ids.dim(1); ++j)
        if (rec.block_ids.at(t, j) != out.block_ids.at(t, j)) same[static_cast<size_t>(t)] = false;
    tensor("block_scores", rec.block_scores, out.block_scores, {"row", "slot"}, &same);
  }

  const QsaConfig& c_;
  const ReplayOptions& o_;
  ToleranceContext ctx_;
  ReplayReport& report_;
  int step_ = 0;
  std::vector<bool> mask_;
};

}  // namespace

bool replay_backend_is_gpu(const std::string& backend) { return backend == "hip" || backend == "both"; }

ReplayReport replay_trace(const Trace& trace, const std::string& path, const ReplayOptions& o) {
  if (o.backend != "reference" && !replay_backend_is_gpu(o.backend))
    throw ConfigError(fmt::format("unknown backend '{}' (accepted: reference, hip, both)", o.backend));
  if (replay_backend_is_gpu(o.backend) && o.mode == ReplayMode::kIsolated)
    throw ConfigError(fmt::format("--backend {} replays chained only: the GPU driver cannot feed recorded stages "
                                  "(use --mode chained)",
                                  o.backend));
  if (o.only_step >= static_cast<int>(trace.steps.size()))
    throw ConfigError(fmt::format("--step {} is out of range: the trace has {} steps", o.only_step, trace.steps.size()));
  // A GPU accumulates in fp32: against anything, even a trace this tool
  // produced, it is a different implementation.
  const ToleranceContext ctx = !o.auto_context ? o.context
                               : (trace.producer == "qsa gen" && !replay_backend_is_gpu(o.backend))
                                   ? ToleranceContext::kSameImplementation
                                   : ToleranceContext::kEngine;
  ReplayReport report;
  report.trace_path = path;
  report.backend = o.backend;
  report.mode = to_string(o.mode);
  report.seed = trace.seed;
  report.repro_base = fmt::format("qsa replay {} --mode {} --backend {}", path, to_string(o.mode), o.backend);

  // `both`: the GPU against the reference, step by step, both chained from
  // the same initial state; the reference's outputs stand in for the
  // recording.
  std::unique_ptr<StepRunner> reference = o.backend == "hip" ? nullptr : make_reference_runner(trace);
  std::unique_ptr<StepRunner> gpu = replay_backend_is_gpu(o.backend) ? make_gpu_runner(trace) : nullptr;
  StepComparer comparer(trace, o, ctx, report);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    const TraceStep& step = trace.steps[s];
    const StageRecord* feed = o.mode == ReplayMode::kIsolated ? &step.recorded : nullptr;
    if (o.backend == "reference") {
      comparer.compare(static_cast<int>(s), step.recorded, reference->run(step, feed));
    } else if (o.backend == "hip") {
      comparer.compare(static_cast<int>(s), step.recorded, gpu->run(step, nullptr));
    } else {
      const StageRecord expected = as_record(reference->run(step, nullptr));
      comparer.compare(static_cast<int>(s), expected, gpu->run(step, nullptr));
    }
  }
  return report;
}

}  // namespace qsa
