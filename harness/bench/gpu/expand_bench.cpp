// expand/<shape>: gpu::launch_expand on random selections (valid prefixes of
// min(V, K_B) visible blocks) at every decode and prefill shape.
#include <cstdint>

#include "gpu/expand/expand.hpp"
#include "gpu/expand/expand_validate.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"

namespace qsa::bench {

namespace {

void bench_expand(benchmark::State& state, const StepShape& shape) {
  const GpuEnv& env = gpu_env();
  const QsaConfig c = bench_config();
  const ExpandParams p = make_expand_params(c);
  const KernelCost cost = expand_cost(c, shape);
  const int copies = rotation_copies(cost.bytes);
  const int64_t T = shape.rows();
  const PagePool no_pages = make_page_pool(1, 1, false, env.seed);  // expand reads no cache
  Slab<int32_t> ids, out;
  Slab<int64_t> pos;
  for (int k = 0; k < copies; ++k) {
    const BatchMetadata m = make_batch_metadata(c, shape, no_pages, k, env.seed, Want::kBlockIds, env.selection_share);
    gpu::validate_expand(p, m.block_ids, m.pos);
    ids.add(m.block_ids.data);
    pos.add(m.pos);
  }
  ids.upload();
  pos.upload();
  out.allocate(copies, static_cast<size_t>(T * p.width()));
  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::launch_expand(p, T, ids.at(k), pos.at(k), out.at(k), env.stream);
  });
  set_cost_counters(state, t, cost);
}

}  // namespace

void register_expand_benchmarks() {
  for (const bool decode : {true, false})
    for (const NamedShape& s : decode ? decode_grid() : prefill_grid(false))
      register_gpu_benchmark("expand/" + s.name, [shape = s.shape](benchmark::State& st) {
        guarded(st, [&] { bench_expand(st, shape); });
      });
}

}  // namespace qsa::bench
