#include "harness/sweep/sweep_point.hpp"

#include <fmt/format.h>

#include <map>

#include "harness/replay/replay.hpp"
#include "harness/sweep/sweep_kv.hpp"
#include "harness/sweep/sweep_row.hpp"
#include "reference/parallel.hpp"
#include "reference/step_driver.hpp"

namespace qsa {

PointValues run_sweep_point(const SweepTrace& input, const SweepPoint& pt, const std::vector<ScoredRow>& rows,
                            const SweepSettings& s) {
  const Trace& trace = input.trace;
  const QsaConfig c = point_config(trace.config, pt);
  StepDriver driver(c, trace.weights, trace.geometry);
  restore_initial_state(trace.initial_state, driver);
  std::vector<KvCacheParams> kv_params;
  for (KvDtype d : s.axes.kv_dtypes)
    kv_params.push_back(sweep_kv_params(trace.config, d, s.octave_window, s.octave_sinks));

  RowSetup setup;
  setup.heads = c.num_heads;
  setup.kv_heads = c.num_kv_heads;
  setup.head_dim = c.head_dim;
  setup.ratio = pt.ratio;
  setup.scale = c.attention_scale();
  setup.o_proj = &trace.weights.o_proj;
  setup.policies = s.axes.policies;
  setup.budgets = pt.budgets;
  setup.window_sinks = s.window_sinks;

  PointValues values(s.axes, pt.budgets, c.num_heads, static_cast<int64_t>(rows.size()));
  size_t next = 0;
  for (size_t step = 0; step < trace.steps.size() && next < rows.size(); ++step) {
    const TraceStep& ts = trace.steps[step];
    const StepOutputs out = driver.run(ts.meta, ts.hidden);
    const size_t begin = next;
    while (next < rows.size() && rows[next].step == static_cast<int>(step)) ++next;
    if (begin == next) continue;

    // Each request's context once per step: every row of the request reads
    // a prefix of it (its own p + 1 tokens).
    const StepLayout& l = out.layout;
    std::map<int, int64_t> needed;
    for (size_t i = begin; i < next; ++i) {
      int64_t& n = needed[l.token_to_req[rows[i].row]];
      n = std::max(n, rows[i].pos + 1);
    }
    std::map<int, ContextKv> contexts;
    for (const auto& [req, n] : needed) {
      ContextKv ctx = gather_context(driver.kv_cache(), l, req, n);
      quantize_context(kv_params, l.seq_lens[req], ctx);
      contexts.emplace(req, std::move(ctx));
    }
    parallel_for(static_cast<int64_t>(next - begin), [&](int64_t i) {
      const ScoredRow& r = rows[begin + static_cast<size_t>(i)];
      RowInput in;
      in.pos = r.pos;
      in.visible = l.visible_blocks[r.row];
      in.q = out.q.row(r.row);
      in.gate = out.gate.row(r.row);
      in.context = &contexts.at(l.token_to_req[r.row]);
      in.block_ids = out.block_ids.row(r.row);
      in.block_width = static_cast<int>(out.block_ids.dim(1));
      in.random = CounterRng(s.seed, fmt::format("sweep.random.t{}.s{}.row{}.r{}", pt.trace, step, r.row, pt.ratio));
      values.put(static_cast<int64_t>(begin) + i, score_row(setup, in));
    });
  }
  return values;
}

}  // namespace qsa
