// The reference's stages and a whole step, one benchmark each:
//   cpu/<preset>/<stage>/<shape>
// with the stages of StepDriver::run (projections, norm_rope,
// caches_pooling, select, expand, attention, gate_oproj) and `step`, at the
// `tiny` and `qwen4-exp` presets. Counters: the cost model's FLOPs and the
// achieved GFLOP/s of the fp64 reference (stages without dot products have
// none); `step` also reports its phases' seconds as StepDriver measured them.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/bench/cost_model.hpp"
#include "harness/bench/cpu/cpu_bench.hpp"
#include "harness/bench/cpu/cpu_case.hpp"
#include "harness/bench/shape_names.hpp"
#include "reference/attention.hpp"
#include "reference/compress.hpp"
#include "reference/expand.hpp"
#include "reference/gate.hpp"
#include "reference/projection.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rope.hpp"
#include "reference/select.hpp"

namespace qsa::bench {

namespace {

void norm_and_rope(const QsaConfig& c, const StepLayout& l, const TensorD& w, int heads, int dim, TensorD& x) {
  gemma_rms_norm(make_rms_norm_params(c, x.numel() / dim, dim), x, w, x);
  apply_rope(make_rope_params(c, heads, dim), l.rope_pos, x);
}

void run_projections(CpuCase& cc) {
  const QsaConfig& c = cc.config;
  const LayerWeights& w = cc.driver->weights();
  const int64_t T = cc.out.layout.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  TensorD idx, qg, k, v;
  project(make_projection_params(c, T, c.hidden_size, (HI + 1) * dI), cc.hidden, w.index_qk_proj, idx);
  project(make_projection_params(c, T, c.hidden_size, H * 2 * D), cc.hidden, w.q_proj, qg);
  project(make_projection_params(c, T, c.hidden_size, G * D), cc.hidden, w.k_proj, k);
  project(make_projection_params(c, T, c.hidden_size, G * D), cc.hidden, w.v_proj, v);
  benchmark::DoNotOptimize(v.data.data());
}

void run_select(CpuCase& cc, TensorI32& ids, TensorD& scores) {
  const StepLayout& l = cc.out.layout;
  const SelectParams sp = make_select_params(cc.config);
  for (int i = 0; i < l.num_reqs; ++i) {
    int32_t max_visible = 0;
    for (int64_t t = l.row_begin(i); t < l.row_end(i); ++t) max_visible = std::max(max_visible, l.visible_blocks[t]);
    const TensorD kc = gather_compressed_keys(l, i, max_visible, cc.driver->compressed_cache());
    select_rows(sp, cc.out.index_q, l.visible_blocks, l.row_begin(i), l.row_end(i), kc, ids, scores);
  }
}

using StageFn = std::function<void(benchmark::State&, CpuCase&)>;

// name -> (body, cost of one iteration or nothing)
struct Stage {
  std::string name;
  StageFn body;
  std::function<KernelCost(const QsaConfig&, const StepShape&)> cost;
};

std::vector<Stage> stages() {
  std::vector<Stage> s;
  s.push_back({"projections",
               [](benchmark::State& st, CpuCase& cc) {
                 for (auto _ : st) run_projections(cc);
               },
               input_projections_cost});
  s.push_back({"norm_rope",
               [](benchmark::State& st, CpuCase& cc) {
                 const QsaConfig& c = cc.config;
                 const LayerWeights& w = cc.driver->weights();
                 const CompressParams cp = make_compress_params(c);
                 TensorD iq = cc.out.index_q, q = cc.out.q, k = cc.out.k;
                 for (auto _ : st) {
                   norm_and_rope(c, cc.out.layout, w.index_q_norm, c.indexer_heads, c.indexer_head_dim, iq);
                   for (double& x : iq.data) x = quantize_indexer(cp, x);
                   norm_and_rope(c, cc.out.layout, w.q_norm, c.num_heads, c.head_dim, q);
                   norm_and_rope(c, cc.out.layout, w.k_norm, c.num_kv_heads, c.head_dim, k);
                 }
               },
               nullptr});
  s.push_back({"caches_pooling",
               [](benchmark::State& st, CpuCase& cc) {
                 const QsaConfig& c = cc.config;
                 const StepLayout& l = cc.out.layout;
                 StepDriver& d = *cc.driver;
                 for (auto _ : st) {
                   for (int64_t t = 0; t < l.num_valid_tokens; ++t)
                     d.kv_cache().write(l.main_slot[t], l.pos[t], cc.out.k.row(t), cc.out.v.row(t));
                   const CompressedRows rows = compress_completed_groups(
                       make_compress_params(c), make_rms_norm_params(c, 1, c.indexer_head_dim),
                       make_rope_params(c, 1, c.indexer_head_dim), d.weights().index_k_norm, l, cc.out.raw_keys,
                       d.ring(), d.compressed_cache());
                   write_ring(l, cc.out.raw_keys, d.ring());
                   benchmark::DoNotOptimize(rows.keys.data.data());
                 }
               },
               nullptr});
  s.push_back({"select",
               [](benchmark::State& st, CpuCase& cc) {
                 TensorI32 ids = cc.out.block_ids;
                 TensorD scores = cc.out.block_scores;
                 for (auto _ : st) run_select(cc, ids, scores);
               },
               select_cost});
  s.push_back({"expand",
               [](benchmark::State& st, CpuCase& cc) {
                 const ExpandParams ep = make_expand_params(cc.config);
                 TensorI32 idx;
                 for (auto _ : st) expand_rows(ep, cc.out.block_ids, cc.out.layout.pos, idx);
               },
               expand_cost});
  s.push_back({"attention",
               [](benchmark::State& st, CpuCase& cc) {
                 const AttentionParams p = make_attention_params(cc.config);
                 TensorD attn;
                 for (auto _ : st)
                   sparse_attention(p, cc.out.q, cc.out.token_idx, cc.out.layout, cc.driver->kv_cache(), attn);
               },
               [](const QsaConfig& c, const StepShape& sh) { return attention_cost(c, sh); }});
  s.push_back({"gate_oproj",
               [](benchmark::State& st, CpuCase& cc) {
                 const QsaConfig& c = cc.config;
                 const int64_t T = cc.out.layout.num_tokens;
                 TensorD gated, y;
                 for (auto _ : st) {
                   apply_gate(make_gate_params(c), cc.out.attn, cc.out.gate, gated);
                   project_rows(make_projection_params(c, T, c.num_heads * c.head_dim, c.hidden_size), gated.ptr(),
                                cc.driver->weights().o_proj, y);
                 }
               },
               output_projection_cost});
  s.push_back({"step",
               [](benchmark::State& st, CpuCase& cc) {
                 std::map<std::string, double> phases;
                 for (auto _ : st)
                   for (const auto& [phase, sec] : cc.driver->run(cc.meta, cc.hidden).seconds) phases[phase] += sec;
                 for (const auto& [phase, sec] : phases)
                   st.counters["s_" + phase] = benchmark::Counter(sec, benchmark::Counter::kAvgIterations);
               },
               // (step_cost's third parameter has a default, which a std::function does not see)
               [](const QsaConfig& c, const StepShape& sh) { return step_cost(c, sh); }});
  return s;
}

}  // namespace

void register_stage_benchmarks(const std::string& prefix, const QsaConfig& config, const StepShape& shape,
                               const std::vector<std::string>& only) {
  for (Stage& s : stages()) {
    if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
    const std::string name = "cpu/" + prefix + "/" + s.name + "/" + shape_label(shape);
    auto cost = s.cost;
    benchmark::RegisterBenchmark(name.c_str(), [config, shape, body = s.body, cost](benchmark::State& st) {
      try {
        CpuCase& cc = cpu_case(config, shape);
        body(st, cc);
        if (cost) set_cpu_cost_counters(st, cost(config, shape));
      } catch (const std::exception& e) {
        st.SkipWithError(e.what());
      }
    })
        ->MeasureProcessCPUTime()  // cpu_time: all threads' work, robust to a busy machine
        ->UseRealTime()            // real_time and the rates: wall clock
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace qsa::bench
