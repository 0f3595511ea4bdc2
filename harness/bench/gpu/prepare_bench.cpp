// prepare/<shape>/<dtype>: gpu::launch_prepare (norms, RoPE, indexer-dtype
// store, KV writes, pooling, ring) at the decode batches and prefill chunks
// after 32K tokens of context; <dtype> is the indexer and the KV dtype
// together. The kernel reads nothing of the cached context, so only the pages
// the step writes are mapped, every request of every input set on pages of
// its own (the launch requires distinct slots).
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/prepare/prepare.hpp"
#include "gpu/prepare/prepare_validate.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"
#include "harness/bench/gpu/prepare_slabs.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::bench {

namespace {

constexpr int64_t kPrepareContext = 32768;

// Pages a request's chunk spans.
int64_t span_pages(const QsaConfig& c, const RequestChunk& q) {
  return (q.seq_len() - 1) / c.page_size - q.context / c.page_size + 1;
}

// The step's metadata for input set `copy`: the chunk's pages from the pool
// (set k, request i at consecutive slots of the pool order), ring block
// copy · R + i.
StepMetadata prepare_metadata(const QsaConfig& c, const StepShape& s, const PagePool& pool, int64_t span, int copy) {
  const int R = static_cast<int>(s.requests.size());
  StepMetadata m;
  m.query_start_loc.push_back(0);
  int64_t max_pages = 1;
  for (const RequestChunk& q : s.requests) max_pages = std::max(max_pages, (q.seq_len() + c.page_size - 1) / c.page_size);
  m.block_table = TensorI32({R, max_pages}, -1);
  std::vector<int64_t> positions;
  for (int i = 0; i < R; ++i) {
    const RequestChunk& q = s.requests[static_cast<size_t>(i)];
    m.query_start_loc.push_back(m.query_start_loc.back() + static_cast<int32_t>(q.query_len));
    m.seq_lens.push_back(static_cast<int32_t>(q.seq_len()));
    const int64_t first = q.context / c.page_size;
    for (int64_t j = 0; j < span_pages(c, q); ++j) {
      const int64_t logical = (int64_t{copy} * R + i) * span + j;
      m.block_table.at(i, first + j) = pool.order[static_cast<size_t>(logical % pool.pages)];
    }
    for (int64_t p = q.context; p < q.seq_len(); ++p) positions.push_back(p);
    m.ring_blocks.push_back(copy * R + i);
  }
  m.positions = TensorI64({static_cast<int64_t>(positions.size())});
  m.positions.data = positions;
  return m;
}

void bench_prepare(benchmark::State& state, const StepShape& shape, bool fp8) {
  const GpuEnv& env = gpu_env();
  QsaConfig c = bench_config();
  c.indexer_dtype = fp8 ? IndexerDtype::kFp8 : IndexerDtype::kBf16;
  c.kv_dtype = fp8 ? KvDtype::kFp8 : KvDtype::kBf16;
  const KernelCost cost = prepare_cost(c, shape);
  const int copies = rotation_copies(cost.bytes);
  const int R = static_cast<int>(shape.requests.size());
  const int64_t T = shape.rows();
  int64_t span = 1;
  for (const RequestChunk& q : shape.requests) span = std::max(span, span_pages(c, q));
  const size_t e_kv = static_cast<size_t>(kv_element_bytes(c.kv_dtype));
  const size_t slot_bytes = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim) * e_kv;
  const double page_bytes = 2.0 * static_cast<double>(c.page_size) * static_cast<double>(slot_bytes);
  const int64_t wanted = int64_t{copies} * R * span;
  // A launch needs distinct slots: the pool holds at least one set's pages.
  const PagePool pool = make_page_pool(
      wanted, std::max<int64_t>(int64_t{R} * span, static_cast<int64_t>(kPoolBytes / page_bytes)), env.shuffled_pages,
      env.seed);
  const CacheGeometry geometry{pool.pages, int64_t{copies} * R};
  const gpu::PrepareParams pp = gpu::make_prepare_params(c, pool.pages);
  const int C = c.ring_capacity();
  gpu::PrepareLayout layout;
  layout.num_tokens = T;
  layout.num_reqs = R;
  layout.num_ring_slots = geometry.num_ring_blocks * C;
  layout.num_compressed_rows = pool.pages * c.compressed_rows_per_page();
  layout.num_kv_slots = pool.pages * c.page_size;
  const std::vector<int64_t> ring_tags(static_cast<size_t>(layout.num_ring_slots), -1);

  PrepareSlabs slabs;
  for (int k = 0; k < copies; ++k) {
    const StepLayout l = derive_step_layout(c, geometry, prepare_metadata(c, shape, pool, span, k));
    gpu::validate_prepare(pp, l, ring_tags);
    slabs.add(l);
  }
  slabs.upload();
  // The caches are only written: left uninitialised.
  slabs.allocate(c, layout, copies, "prepare");
  slabs.fill_inputs("prepare");

  const Timing t =
      time_launches(state, copies, [&](int k) { gpu::launch_prepare(pp, layout, slabs.args(k), env.stream); });
  set_cost_counters(state, t, cost);
}

}  // namespace

void register_prepare_benchmarks() {
  std::vector<NamedShape> shapes;
  for (const int b : kDecodeBatches) shapes.push_back({decode_name(b, kPrepareContext), decode_shape(b, kPrepareContext)});
  for (const int64_t n : kPrefillChunks)
    shapes.push_back({prefill_name(n, kPrepareContext), prefill_shape(n, kPrepareContext)});
  for (const bool fp8 : {false, true})
    for (const NamedShape& s : shapes)
      register_gpu_benchmark("prepare/" + s.name + (fp8 ? "/fp8" : "/bf16"), [shape = s.shape, fp8](benchmark::State& st) {
        guarded(st, [&] { bench_prepare(st, shape, fp8); });
      });
}

}  // namespace qsa::bench
