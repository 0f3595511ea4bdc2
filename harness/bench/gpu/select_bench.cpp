// select/<shape>/<indexer dtype>: gpu::launch_select (scores + canonical
// top-K_B) over a paged compressed cache, through the decode path at decode
// shapes and the prefill path at prefill shapes (the label names the path).
#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/select/select.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"

namespace qsa::bench {

namespace {

void bench_select(benchmark::State& state, const StepShape& shape, IndexerDtype dtype, gpu::SelectPath path) {
  const GpuEnv& env = gpu_env();
  QsaConfig c = bench_config();
  c.indexer_dtype = dtype;
  const SelectParams p = make_select_params(c);
  const gpu::IndexerCodes codes{dtype, c.fp8_flavor};
  const KernelCost cost = select_cost(c, shape);
  const int copies = rotation_copies(cost.bytes);
  const auto R = static_cast<int64_t>(shape.requests.size());
  const int64_t T = shape.rows();
  const int rpp = c.compressed_rows_per_page();
  const size_t row_bytes = static_cast<size_t>(c.indexer_head_dim) * codes.bytes();
  const double page_bytes = static_cast<double>(rpp) * static_cast<double>(row_bytes);
  const PagePool pool = make_page_pool(copies * R * pages_per_request(c, shape),
                                       static_cast<int64_t>(kPoolBytes / page_bytes), env.shuffled_pages, env.seed);

  Slab<int32_t> t2r, vis, table, ids;
  Slab<float> scores;
  Slab<uint8_t> q, keys;
  gpu::SelectLayout layout;
  for (int k = 0; k < copies; ++k) {
    const BatchMetadata m = make_batch_metadata(c, shape, pool, k, env.seed, Want::kTables, env.selection_share);
    layout = gpu::validate_select(p, codes, pool.pages, rpp, m.token_to_req, m.visible, m.block_table);
    t2r.add(m.token_to_req);
    vis.add(m.visible);
    table.add(m.block_table.data);
  }
  t2r.upload();
  vis.upload();
  table.upload();
  const FillKind kind = fill_kind(dtype, c.fp8_flavor);
  keys.allocate(1, static_cast<size_t>(pool.pages) * static_cast<size_t>(rpp) * row_bytes);
  keys.fill(kind, "select.compressed_keys");
  q.allocate(copies, static_cast<size_t>(T) * static_cast<size_t>(p.heads) * row_bytes);
  q.fill(kind, "select.index_q");
  ids.allocate(copies, static_cast<size_t>(T) * static_cast<size_t>(p.blocks_budget));
  scores.allocate(copies, static_cast<size_t>(T) * static_cast<size_t>(p.blocks_budget));
  Slab<float> scratch;  // shared by the sets: an engine reuses one workspace
  scratch.allocate(1, std::max<size_t>(1, gpu::select_scratch_floats(layout)));
  gpu::select_zero_row_hist(layout, scratch.at(0), env.stream);  // once, as an engine would

  state.SetLabel(path == gpu::SelectPath::kPrefill ? "path=prefill" : "path=decode");
  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::launch_select(p, codes, layout, q.at(k), keys.at(0), t2r.at(k), vis.at(k), table.at(k), scratch.at(0),
                       ids.at(k), scores.at(k), env.stream, path);
  });
  set_cost_counters(state, t, cost);
}

void add(const NamedShape& s, IndexerDtype dtype, gpu::SelectPath path) {
  register_gpu_benchmark("select/" + s.name + "/" + dtype_name(dtype),
                         [shape = s.shape, dtype, path](benchmark::State& st) {
                           guarded(st, [&] { bench_select(st, shape, dtype, path); });
                         });
}

}  // namespace

void register_select_benchmarks() {
  for (const IndexerDtype d : {IndexerDtype::kBf16, IndexerDtype::kFp8})
    for (const NamedShape& s : decode_grid()) add(s, d, gpu::SelectPath::kDecode);
  for (const IndexerDtype d : {IndexerDtype::kBf16, IndexerDtype::kFp8})
    for (const NamedShape& s : prefill_grid(d == IndexerDtype::kFp8)) add(s, d, gpu::SelectPath::kPrefill);
}

}  // namespace qsa::bench
