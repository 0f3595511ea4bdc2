// attention/<shape>/<kv dtype>: gpu::launch_sparse_attention (split-K sparse
// GQA with the sigmoid-gate epilogue) over a paged main KV cache, on
// token-index rows expanded from random selections of a causal context:
// the decode path at decode shapes (kAuto's kernel; /split_kernel and
// /spread_kernel force one of the two tensor-core ones at 1 and 8 rows), the prefill path at prefill
// shapes with its host-built plan (not timed; its arrays are not in the
// cost model's minimal bytes). The label names the path. The decode path
// gets each id's cache slot beside the ids (SparseAttentionArgs::
// token_slots), as the step driver's expand writes them; /ids_only at 1
// and 8 rows gives it the ids alone (the spread kernel then resolves each
// id through the block table: docs/performance.md, twenty-ninth pass).
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_validate.hpp"
#include "reference/core/step_layout.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"

namespace qsa::bench {

namespace {

// The prefill plan of one input set on the device.
struct DevicePlan {
  gpu::DeviceBuffer<int32_t> tiles, ids;
  gpu::DeviceBuffer<uint32_t> masks;
  int64_t num_tiles = 0, num_entries = 0;
  int rows_per_tile = 0;
};

// caller_splits: split-K as sparse_attention_ids_per_split chooses it (the
// step driver's policy: one split above 128 rows, whose workspace would not
// fit at the default's splits of 8192 rows) instead of the default.
void bench_attention(benchmark::State& state, const StepShape& shape, KvDtype dtype, gpu::AttentionPath path,
                     bool caller_splits = false, bool ids_only = false) {
  const GpuEnv& env = gpu_env();
  QsaConfig c = bench_config();
  c.kv_dtype = dtype;
  const AttentionParams p = make_attention_params(c);
  const GateParams gp = make_gate_params(c);
  const auto R = static_cast<int64_t>(shape.requests.size());
  const int64_t T = shape.rows();
  const size_t e = static_cast<size_t>(kv_element_bytes(dtype));
  const size_t slot_bytes = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim) * e;
  const double page_bytes = 2.0 * static_cast<double>(c.page_size) * static_cast<double>(slot_bytes);  // K and V
  const int64_t max_pool_pages = static_cast<int64_t>(kPoolBytes / page_bytes);

  // The first set's ids give the exact distinct-token count of the cost (the
  // sets differ only in their random draws); the cost sizes the rotation.
  const PagePool first_pool = make_page_pool(R * pages_per_request(c, shape), max_pool_pages, false, env.seed);
  const int64_t unique =
      make_batch_metadata(c, shape, first_pool, 0, env.seed, Want::kTokenIdx, env.selection_share).unique_kv_tokens;
  const KernelCost cost = attention_cost(c, shape, unique);
  const int copies = rotation_copies(cost.bytes);
  const PagePool pool = make_page_pool(copies * R * pages_per_request(c, shape), max_pool_pages, env.shuffled_pages,
                                       env.seed);
  const KvCacheParams kv = make_kv_cache_params(c, pool.pages);

  const bool with_slots = !gpu::is_prefill_path(path) && !ids_only;
  Slab<int32_t> idx, t2r, lens, table, slots;
  gpu::SparseAttentionDims dims;
  std::vector<DevicePlan> plans;
  double reuse = 0.0;  // the first set's plan: attended (row, id) pairs per entry loaded
  for (int k = 0; k < copies; ++k) {
    const BatchMetadata m = make_batch_metadata(c, shape, pool, k, env.seed, Want::kTokenIdx, env.selection_share);
    dims = gpu::validate_sparse_attention(p, kv, m.token_idx, m.token_to_req, m.seq_lens, m.block_table,
                                          gpu::TokenIdCheck::kStrict);
    if (gpu::is_prefill_path(path)) {
      const gpu::SparseAttentionPrefillPlan plan =
          gpu::plan_sparse_attention_prefill(p, dims, m.token_idx, m.token_to_req, m.seq_lens, m.block_table);
      if (k == 0 && plan.num_entries() > 0)
        reuse = static_cast<double>(plan.row_ids) / static_cast<double>(plan.num_entries());
      plans.push_back({gpu::DeviceBuffer<int32_t>(plan.tiles), gpu::DeviceBuffer<int32_t>(plan.ids),
                       gpu::DeviceBuffer<uint32_t>(plan.masks), plan.num_tiles(), plan.num_entries(),
                       plan.rows_per_tile});
    }
    idx.add(m.token_idx.data);
    if (with_slots) {
      TensorI32 s;
      token_slots(m.token_idx, p.count_column, m.token_to_req, m.seq_lens, m.block_table, p.page_size, kv.num_pages,
                  s);
      slots.add(s.data);
    }
    t2r.add(m.token_to_req);
    lens.add(m.seq_lens);
    table.add(m.block_table.data);
  }
  idx.upload();
  if (with_slots) slots.upload();
  t2r.upload();
  lens.upload();
  table.upload();

  const FillKind kv_kind = fill_kind(dtype, c.fp8_flavor);
  const size_t pool_bytes = static_cast<size_t>(pool.pages) * static_cast<size_t>(c.page_size) * slot_bytes;
  Slab<uint8_t> k_cache, v_cache;
  k_cache.allocate(1, pool_bytes);
  v_cache.allocate(1, pool_bytes);
  k_cache.fill(kv_kind, "attention.k_cache");
  v_cache.fill(kv_kind, "attention.v_cache");
  const size_t thd = static_cast<size_t>(T) * static_cast<size_t>(p.heads) * static_cast<size_t>(p.head_dim);
  Slab<uint16_t> q, gate, gated;
  Slab<float> attn, workspace;
  q.allocate(copies, thd);
  gate.allocate(copies, thd);
  q.fill(FillKind::kBf16, "attention.q");
  gate.fill(FillKind::kBf16, "attention.gate");
  attn.allocate(copies, thd);
  gated.allocate(copies, thd);
  // Split-K partials of the decode path, shared by the sets as an engine reuses one workspace.
  const int split_ids = caller_splits ? gpu::sparse_attention_ids_per_split(p, dims) : gpu::kDefaultIdsPerSplit;
  const size_t ws_floats =
      gpu::is_prefill_path(path) ? 0 : gpu::sparse_attention_workspace_floats(p, dims, split_ids);
  workspace.allocate(1, ws_floats);

  state.SetLabel(gpu::is_prefill_path(path) ? "path=prefill" : "path=decode");
  const Timing t = time_launches(state, copies, [&](int k) {
    gpu::SparseAttentionArgs a;
    a.q = q.at(k);
    a.gate = gate.at(k);
    a.token_idx = idx.at(k);
    a.token_slots = with_slots ? slots.at(k) : nullptr;
    a.token_to_req = t2r.at(k);
    a.seq_lens = lens.at(k);
    a.block_table = table.at(k);
    a.k_cache = k_cache.at(0);
    a.v_cache = v_cache.at(0);
    a.attn = attn.at(k);
    a.gated = gated.at(k);
    a.workspace = ws_floats > 0 ? workspace.at(0) : nullptr;
    a.workspace_floats = ws_floats;
    if (gpu::is_prefill_path(path)) {
      const DevicePlan& plan = plans[static_cast<size_t>(k)];
      a.prefill_tiles = plan.tiles.get();
      a.prefill_ids = plan.ids.get();
      a.prefill_masks = plan.masks.get();
      a.prefill_num_tiles = plan.num_tiles;
      a.prefill_num_entries = plan.num_entries;
      a.prefill_rows_per_tile = plan.rows_per_tile;
    }
    gpu::launch_sparse_attention(p, gp, kv, dims, a, env.stream, split_ids, path);
  });
  set_cost_counters(state, t, cost);
  // What kAuto decides the path on (sparse_attention_prefill_min_reuse), so that a
  // share sweep places the kernels' crossover on the same axis.
  if (gpu::is_prefill_path(path)) state.counters["reuse"] = reuse;
  // The splits per row the tensor-core decode kernel took (0 where another
  // kernel ran): what its one-row time depends on (docs/performance.md).
  // The spread kernel's blocks per (row, KV group) where it ran, else 0.
  const int spread = gpu::spread_attention_size(p, dtype, T, path, ws_floats);
  state.counters["spread"] = spread;
  if (spread == 0 && (path == gpu::AttentionPath::kDecode || path == gpu::AttentionPath::kDecodeSplitK))
    state.counters["splits"] = gpu::tensor_core_attention_splits(p, dtype, T, split_ids);
}

void add(const NamedShape& s, KvDtype dtype, gpu::AttentionPath path, const std::string& suffix = "",
         bool caller_splits = false, bool ids_only = false) {
  register_gpu_benchmark("attention/" + s.name + "/" + dtype_name(dtype) + suffix,
                         [shape = s.shape, dtype, path, caller_splits, ids_only](benchmark::State& st) {
                           guarded(st, [&] { bench_attention(st, shape, dtype, path, caller_splits, ids_only); });
                         });
}

}  // namespace

void register_attention_benchmarks() {
  for (const KvDtype d : {KvDtype::kBf16, KvDtype::kFp8})
    for (const NamedShape& s : decode_grid()) add(s, d, gpu::AttentionPath::kDecode);
  for (const KvDtype d : {KvDtype::kBf16, KvDtype::kFp8})
    for (const NamedShape& s : prefill_grid(d == KvDtype::kFp8)) add(s, d, gpu::AttentionPath::kPrefill);
  // The decode kernel (the tensor-core one on NVIDIA) on prefill rows, each
  // row on its own: whether it beats the plan-based prefill kernel.
  for (const NamedShape& s : prefill_grid(false))
    add(s, KvDtype::kBf16, gpu::AttentionPath::kDecode, "/decode_kernel", true);
  // Each tensor-core decode kernel at the batches where kAuto may choose
  // between them (sparse_attention_mma.hpp: the spread kernel for a few
  // rows, the split-K kernel and its merge otherwise).
  for (const NamedShape& s : decode_grid())
    if (s.shape.rows() <= 8) {
      add(s, KvDtype::kBf16, gpu::AttentionPath::kDecodeSplitK, "/split_kernel");
      add(s, KvDtype::kBf16, gpu::AttentionPath::kDecodeSpread, "/spread_kernel");
      add(s, KvDtype::kBf16, gpu::AttentionPath::kDecode, "/ids_only", false, true);
    }
  // The prefill path without the Hopper kernel (its sm_80 tensor-core
  // kernel on an H200): what the wgmma kernel gains over it.
  for (const NamedShape& s : prefill_grid(false))
    add(s, KvDtype::kBf16, gpu::AttentionPath::kPrefillMmaSync, "/mma_sync_kernel");
}

}  // namespace qsa::bench
