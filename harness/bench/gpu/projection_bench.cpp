// projection/<weight>/t<rows>: gpu::launch_projection_bf16 (y = x · w^T, bf16
// in and out, fp32 accumulation) for the layer's weights at the decode batch
// sizes and prefill chunks (the cost does not depend on the context). The
// weight is part of every input set: at a few rows it is the traffic.
#include <cstdint>
#include <string>

#include "gpu/projection/projection.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"

namespace qsa::bench {

namespace {

struct Weight {
  std::string name;
  int in_dim, out_dim;
};

std::vector<Weight> weights(const QsaConfig& c) {
  const int HD = c.num_heads * c.head_dim, GD = c.num_kv_heads * c.head_dim;
  return {{"index_qk_proj", c.hidden_size, (c.indexer_heads + 1) * c.indexer_head_dim},
          {"q_proj", c.hidden_size, 2 * HD},
          {"k_proj", c.hidden_size, GD},  // v_proj has the same shape
          {"o_proj", HD, c.hidden_size}};
}

void bench_projection(benchmark::State& state, const Weight& w, int64_t rows) {
  const GpuEnv& env = gpu_env();
  const ProjectionParams p = make_projection_params(bench_config(), rows, w.in_dim, w.out_dim);
  const KernelCost cost = projection_cost(rows, w.in_dim, w.out_dim);
  const int copies = rotation_copies(cost.bytes);
  Slab<uint16_t> x, wt, y;
  x.allocate(copies, static_cast<size_t>(rows) * static_cast<size_t>(w.in_dim));
  wt.allocate(copies, static_cast<size_t>(w.out_dim) * static_cast<size_t>(w.in_dim));
  y.allocate(copies, static_cast<size_t>(rows) * static_cast<size_t>(w.out_dim));
  x.fill(FillKind::kBf16, "projection.x");
  wt.fill(FillKind::kBf16, "projection.w");
  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::launch_projection_bf16(p, x.at(k), wt.at(k), y.at(k), env.stream);
  });
  set_cost_counters(state, t, cost);
}

}  // namespace

void register_projection_benchmarks() {
  std::vector<int64_t> rows(kDecodeBatches.begin(), kDecodeBatches.end());
  rows.insert(rows.end(), kPrefillChunks.begin(), kPrefillChunks.end());
  for (const Weight& w : weights(bench_config()))
    for (const int64_t t : rows)
      register_gpu_benchmark("projection/" + w.name + "/t" + std::to_string(t), [w, t](benchmark::State& st) {
        guarded(st, [&] { bench_projection(st, w, t); });
      });
}

}  // namespace qsa::bench
