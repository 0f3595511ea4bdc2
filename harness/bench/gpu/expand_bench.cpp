// expand/<shape>: gpu::launch_expand on random selections (valid prefixes of
// min(V, K_B) visible blocks) at every decode and prefill shape;
// expand/<shape>/slots also writes each id's cache slot (gpu::ExpandSlots,
// as the step driver runs it), its cost the slots and the metadata read on
// top (the requests' block-table rows counted whole).
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

void bench_expand(benchmark::State& state, const StepShape& shape, bool with_slots) {
  const GpuEnv& env = gpu_env();
  const QsaConfig c = bench_config();
  const ExpandParams p = make_expand_params(c);
  const int64_t T = shape.rows();
  const auto R = static_cast<int64_t>(shape.requests.size());
  KernelCost cost = expand_cost(c, shape);
  const int64_t pages = pages_per_request(c, shape);
  if (with_slots) cost.bytes += 4.0 * static_cast<double>(T * p.width() + T + R + R * pages);
  const int copies = rotation_copies(cost.bytes);
  // The slots' pages: each set on pages of its own, as attention's benchmark.
  // (At most 2^30 slots in all, so that every slot fits int32.)
  const PagePool pool = with_slots ? make_page_pool(copies * R * pages, (int64_t{1} << 30) / c.page_size,
                                                    env.shuffled_pages, env.seed)
                                   : make_page_pool(1, 1, false, env.seed);
  Slab<int32_t> ids, out, slots, t2r, lens, table;
  Slab<int64_t> pos;
  for (int k = 0; k < copies; ++k) {
    const BatchMetadata m = make_batch_metadata(c, shape, pool, k, env.seed, Want::kBlockIds, env.selection_share);
    gpu::validate_expand(p, m.block_ids, m.pos);
    ids.add(m.block_ids.data);
    pos.add(m.pos);
    if (with_slots) {
      t2r.add(m.token_to_req);
      lens.add(m.seq_lens);
      table.add(m.block_table.data);
    }
  }
  ids.upload();
  pos.upload();
  out.allocate(copies, static_cast<size_t>(T * p.width()));
  if (with_slots) {
    t2r.upload();
    lens.upload();
    table.upload();
    slots.allocate(copies, static_cast<size_t>(T * p.width()));
  }
  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::ExpandSlots s;
    if (with_slots) {
      s.token_to_req = t2r.at(k);
      s.seq_lens = lens.at(k);
      s.block_table = table.at(k);
      s.num_reqs = static_cast<int>(R);
      s.max_pages = static_cast<int>(pages);
      s.page_size = c.page_size;
      s.num_pages = pool.pages;
      s.token_slots = slots.at(k);
    }
    gpu::launch_expand(p, T, ids.at(k), pos.at(k), out.at(k), env.stream, with_slots ? &s : nullptr);
  });
  set_cost_counters(state, t, cost);
}

}  // namespace

void register_expand_benchmarks() {
  for (const bool decode : {true, false})
    for (const NamedShape& s : decode ? decode_grid() : prefill_grid(false))
      for (const bool with_slots : {false, true})
        register_gpu_benchmark("expand/" + s.name + (with_slots ? "/slots" : ""),
                               [shape = s.shape, with_slots](benchmark::State& st) {
                                 guarded(st, [&] { bench_expand(st, shape, with_slots); });
                               });
}

}  // namespace qsa::bench
