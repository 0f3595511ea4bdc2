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
#include "harness/bench/gpu/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"
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
  const size_t e_ix = static_cast<size_t>(indexer_element_bytes(c.indexer_dtype));
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

  Slab<int32_t> t2r, starts, ring_blocks;
  Slab<int64_t> pos, rope_pos, main_slot, ring_slot, comp_slot;
  for (int k = 0; k < copies; ++k) {
    const StepLayout l = derive_step_layout(c, geometry, prepare_metadata(c, shape, pool, span, k));
    gpu::validate_prepare(pp, l, ring_tags);
    t2r.add(l.token_to_req);
    starts.add(l.starts);
    ring_blocks.add(l.ring_blocks);
    pos.add(l.pos);
    rope_pos.add(l.rope_pos.data);
    main_slot.add(l.main_slot);
    ring_slot.add(l.ring_slot);
    comp_slot.add(l.compressed_slot);
  }
  for (auto* s : {&t2r, &starts, &ring_blocks}) s->upload();
  for (auto* s : {&pos, &rope_pos, &main_slot, &ring_slot, &comp_slot}) s->upload();

  const auto sz = [](int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); };
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  Slab<float> index_qk, qg, k_in, v_in, weights, ring_keys;
  index_qk.allocate(copies, sz(T, (HI + 1) * dI));
  qg.allocate(copies, sz(T, 2 * H * D));
  k_in.allocate(copies, sz(T, G * D));
  v_in.allocate(copies, sz(T, G * D));
  weights.allocate(1, sz(2, dI + D));  // index_q, index_k, q, k norm weights
  ring_keys.allocate(1, sz(layout.num_ring_slots, dI));
  index_qk.fill(FillKind::kF32, "prepare.index_qk");
  qg.fill(FillKind::kF32, "prepare.qg");
  k_in.fill(FillKind::kF32, "prepare.k");
  v_in.fill(FillKind::kF32, "prepare.v");
  weights.fill(FillKind::kF32, "prepare.norm_weights");
  ring_keys.fill(FillKind::kF32, "prepare.ring_keys");
  Slab<int64_t> ring_rope;  // read only for groups straddling a chunk start, which these shapes have none of
  ring_rope.allocate(1, sz(layout.num_ring_slots, 3));
  QSA_GPU_CHECK(hipMemsetAsync(ring_rope.at(0), 0, sz(layout.num_ring_slots, 3) * sizeof(int64_t), env.stream));
  Slab<uint8_t> compressed, k_cache, v_cache, index_q;
  compressed.allocate(1, sz(layout.num_compressed_rows, dI) * e_ix);
  k_cache.allocate(1, sz(layout.num_kv_slots, G * D) * e_kv);
  v_cache.allocate(1, sz(layout.num_kv_slots, G * D) * e_kv);
  index_q.allocate(copies, sz(T, HI * dI) * e_ix);
  Slab<uint16_t> q_out, k_out, gate_out;
  q_out.allocate(copies, sz(T, H * D));
  k_out.allocate(copies, sz(T, G * D));
  gate_out.allocate(copies, sz(T, H * D));

  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::PrepareArgs a;
    a.index_qk = index_qk.at(k);
    a.qg = qg.at(k);
    a.k = k_in.at(k);
    a.v = v_in.at(k);
    a.index_q_norm_w = weights.at(0);
    a.index_k_norm_w = weights.at(0) + dI;
    a.q_norm_w = weights.at(0) + 2 * dI;
    a.k_norm_w = weights.at(0) + 2 * dI + D;
    a.token_to_req = t2r.at(k);
    a.pos = pos.at(k);
    a.rope_pos = rope_pos.at(k);
    a.main_slot = main_slot.at(k);
    a.ring_slot = ring_slot.at(k);
    a.compressed_slot = comp_slot.at(k);
    a.starts = starts.at(k);
    a.ring_blocks = ring_blocks.at(k);
    a.ring_keys = ring_keys.at(0);
    a.ring_rope = ring_rope.at(0);
    a.compressed = compressed.at(0);
    a.k_cache = k_cache.at(0);
    a.v_cache = v_cache.at(0);
    a.index_q = index_q.at(k);
    a.q = q_out.at(k);
    a.k_out = k_out.at(k);
    a.gate = gate_out.at(k);
    gpu::launch_prepare(pp, layout, a, env.stream);
  });
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
