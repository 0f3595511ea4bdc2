#include "harness/replay/step_runner.hpp"

#include "harness/replay/replay.hpp"

namespace qsa {

namespace {

class ReferenceRunner final : public StepRunner {
 public:
  explicit ReferenceRunner(const Trace& t) : driver_(t.config, t.weights, t.geometry) {
    restore_initial_state(t.initial_state, driver_);
  }
  StepOutputs run(const TraceStep& step, const StageRecord* feed) override {
    return driver_.run(step.meta, step.hidden, feed);
  }

 private:
  StepDriver driver_;
};

}  // namespace

std::unique_ptr<StepRunner> make_reference_runner(const Trace& trace) {
  return std::make_unique<ReferenceRunner>(trace);
}

StageRecord as_record(const StepOutputs& o) {
  StageRecord r;
  r.index_q = o.index_q;
  r.raw_keys = o.raw_keys;
  const auto n = static_cast<int64_t>(o.compressed.slot.size());
  r.comp_tokens = TensorI32({n});
  r.comp_blocks = TensorI64({n});
  r.comp_slots = TensorI64({n});
  for (int64_t i = 0; i < n; ++i) {
    const auto j = static_cast<size_t>(i);
    r.comp_tokens.at(i) = o.compressed.token[j];
    r.comp_blocks.at(i) = o.compressed.block[j];
    r.comp_slots.at(i) = o.compressed.slot[j];
  }
  r.comp_keys = o.compressed.keys;
  r.block_ids = o.block_ids;
  r.block_scores = o.block_scores;
  r.token_idx = o.token_idx;
  r.q = o.q;
  r.k = o.k;
  r.v = o.v;
  r.gate = o.gate;
  r.attn = o.attn;
  r.gated = o.gated;
  r.out = o.out;
  return r;
}

}  // namespace qsa
