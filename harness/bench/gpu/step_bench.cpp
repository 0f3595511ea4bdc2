// step_no_gemm/<shape>/<dtype>: the launches the GPU step driver
// (gpu/step/gpu_step_driver.cpp) issues between the input projections and
// o_proj — launch_prepare -> launch_select -> launch_expand ->
// launch_sparse_attention, decode paths — timed as one region, each launch
// reading what the one before wrote (prepare's indexer Q, Q and gate; the
// selected ids; the expanded token ids and, as the driver has expand write
// them, each id's cache slot). step/<shape>/<dtype> adds the four
// input projections before and o_proj after (launch_projection, fp32 out, as
// the driver runs them). <dtype> is the indexer and the KV dtype together.
//
// Issue 7's target: step_no_gemm/decode/b64/ctx32768/bf16 at least 5x faster
// than the eager PyTorch baseline (1723 µs). Not timed, unlike the driver:
// the host checks (the launchers' validators run once per input set at
// set-up), the token-id download, the MTP save and the per-step workspace
// allocations.
//
// Metadata per input set: make_batch_metadata's pages and rows (the KV and
// compressed caches share the page ids, as block_table_c = block_table in
// the driver), ring block copy · R + i. Its random token ids are used only
// on the host, to size the attention launch and the cost's KV term; the
// device runs on the ids select and expand produce from random keys.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_validate.hpp"
#include "gpu/expand/expand.hpp"
#include "gpu/prepare/prepare.hpp"
#include "gpu/prepare/prepare_validate.hpp"
#include "gpu/projection/projection.hpp"
#include "gpu/select/select.hpp"
#include "harness/bench/batch_metadata.hpp"
#include "harness/bench/gpu/bench_registry.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_shapes.hpp"
#include "harness/bench/gpu/gpu_timing.hpp"
#include "harness/bench/gpu/prepare_slabs.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::bench {

namespace {

constexpr int64_t kStepContexts[] = {32768, 131072};
constexpr int64_t kFullStepContext = 32768;
constexpr int kFullStepBatches[] = {1, 64};
constexpr int kFp8Batch = 64;
constexpr int64_t kFp8Context = 32768;

size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }

// The step's metadata for input set `copy`, from the benchmarks' shared rows
// and page tables.
StepMetadata step_metadata(const BatchMetadata& m, const StepShape& s, int copy) {
  const int R = static_cast<int>(s.requests.size());
  StepMetadata meta;
  meta.query_start_loc.push_back(0);
  for (const RequestChunk& q : s.requests)
    meta.query_start_loc.push_back(meta.query_start_loc.back() + static_cast<int32_t>(q.query_len));
  meta.seq_lens = m.seq_lens;
  meta.block_table = m.block_table;
  meta.positions = TensorI64({static_cast<int64_t>(m.pos.size())});
  meta.positions.data = m.pos;
  for (int i = 0; i < R; ++i) meta.ring_blocks.push_back(copy * R + i);
  return meta;
}

// The layer's projection weights, one set per input set: at decode rows they
// are most of a step's bytes, and an engine reads them from DRAM every layer.
struct Weights {
  Slab<uint16_t> index_qk, q, k, v, o;
};

void bench_step(benchmark::State& state, const StepShape& shape, bool fp8, bool gemms) {
  const GpuEnv& env = gpu_env();
  QsaConfig c = bench_config();
  c.indexer_dtype = fp8 ? IndexerDtype::kFp8 : IndexerDtype::kBf16;
  c.kv_dtype = fp8 ? KvDtype::kFp8 : KvDtype::kBf16;
  const int R = static_cast<int>(shape.requests.size());
  const int64_t T = shape.rows();
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const int rpp = c.compressed_rows_per_page();
  const size_t e_kv = static_cast<size_t>(kv_element_bytes(c.kv_dtype));
  const size_t e_ix = static_cast<size_t>(indexer_element_bytes(c.indexer_dtype));
  const size_t slot_bytes = static_cast<size_t>(G) * static_cast<size_t>(D) * e_kv;
  const double page_bytes = 2.0 * static_cast<double>(c.page_size) * static_cast<double>(slot_bytes) +
                            static_cast<double>(rpp) * static_cast<double>(dI) * static_cast<double>(e_ix);
  const int64_t ppr = pages_per_request(c, shape);
  // A step writes every request's newest page, so one input set needs all
  // its pages distinct (prepare's validator rejects two tokens on one slot):
  // the pool is at least one set (69 GB at 256 rows x 128K, within an
  // H200), and beyond that the usual cap, as prepare_bench does.
  const int64_t max_pool_pages = std::max<int64_t>(R * ppr, static_cast<int64_t>(kPoolBytes / page_bytes));

  // As attention_bench: the first set's ids give the KV term, the cost sizes the rotation.
  const PagePool first_pool = make_page_pool(R * ppr, max_pool_pages, false, env.seed);
  const int64_t unique =
      make_batch_metadata(c, shape, first_pool, 0, env.seed, Want::kTokenIdx, env.selection_share).unique_kv_tokens;
  const KernelCost cost = gemms ? step_cost(c, shape, unique) : step_no_gemm_cost(c, shape, unique);
  const int copies = rotation_copies(cost.bytes);
  const PagePool pool = make_page_pool(copies * R * ppr, max_pool_pages, env.shuffled_pages, env.seed);
  const CacheGeometry geometry{pool.pages, int64_t{copies} * R};

  const gpu::PrepareParams pp = gpu::make_prepare_params(c, pool.pages);
  const SelectParams sp = make_select_params(c);
  const gpu::IndexerCodes codes{c.indexer_dtype, c.fp8_flavor};
  const ExpandParams ep = make_expand_params(c);
  const AttentionParams ap = make_attention_params(c);
  const GateParams gp = make_gate_params(c);
  const KvCacheParams kvp = make_kv_cache_params(c, pool.pages);
  gpu::PrepareLayout layout;
  layout.num_tokens = T;
  layout.num_reqs = R;
  layout.num_ring_slots = geometry.num_ring_blocks * c.ring_capacity();
  layout.num_compressed_rows = pool.pages * rpp;
  layout.num_kv_slots = pool.pages * c.page_size;
  const std::vector<int64_t> ring_tags(static_cast<size_t>(layout.num_ring_slots), -1);

  PrepareSlabs ps;
  Slab<int32_t> vis, lens, table, table_c;
  gpu::SelectLayout sl;
  gpu::SparseAttentionDims dims;
  for (int k = 0; k < copies; ++k) {
    const BatchMetadata m = make_batch_metadata(c, shape, pool, k, env.seed, Want::kTokenIdx, env.selection_share);
    const StepLayout l = derive_step_layout(c, geometry, step_metadata(m, shape, k));
    gpu::validate_prepare(pp, l, ring_tags);
    sl = gpu::validate_select(sp, codes, pool.pages, rpp, l.token_to_req, l.visible_blocks, l.block_table_c);
    gpu::validate_expand(ep, m.block_ids, l.pos);
    dims = gpu::validate_sparse_attention(ap, kvp, m.token_idx, l.token_to_req, l.seq_lens, l.block_table,
                                          gpu::TokenIdCheck::kStrict);
    ps.add(l);
    vis.add(l.visible_blocks);
    lens.add(l.seq_lens);
    table.add(l.block_table.data);
    table_c.add(l.block_table_c.data);
  }
  ps.upload();
  for (auto* s : {&vis, &lens, &table, &table_c}) s->upload();

  // Prepare's inputs, outputs and persistent state (caches, ring, norm
  // weights); the caches hold a context here, which select and attention read.
  ps.allocate(c, layout, copies, "step");
  ps.k_cache.fill(fill_kind(c.kv_dtype, c.fp8_flavor), "step.k_cache");
  ps.v_cache.fill(fill_kind(c.kv_dtype, c.fp8_flavor), "step.v_cache");
  ps.compressed.fill(fill_kind(c.indexer_dtype, c.fp8_flavor), "step.compressed_keys");
  Slab<float> scratch, workspace;
  scratch.allocate(1, std::max<size_t>(1, gpu::select_scratch_floats(sl)));
  gpu::select_zero_row_hist(sl, scratch.at(0), env.stream);  // once, as an engine would
  const size_t ws_floats = gpu::sparse_attention_workspace_floats(ap, dims);
  workspace.allocate(1, std::max<size_t>(1, ws_floats));

  // Per set: every intermediate and output of the step after prepare's.
  Slab<float> attn;
  attn.allocate(copies, sz(T, H * D));
  Slab<uint16_t> gated;
  gated.allocate(copies, sz(T, H * D));
  Slab<int32_t> ids, token_idx, token_slots;
  ids.allocate(copies, sz(T, sp.blocks_budget));
  token_idx.allocate(copies, sz(T, ep.width()));
  token_slots.allocate(copies, sz(T, ep.width()));
  Slab<float> block_scores;
  block_scores.allocate(copies, sz(T, sp.blocks_budget));

  Slab<uint16_t> hidden;
  Slab<float> out;
  Weights w;
  if (gemms) {
    hidden.allocate(copies, sz(T, c.hidden_size));
    hidden.fill(FillKind::kBf16, "step.hidden");
    w.index_qk.allocate(copies, sz((HI + 1) * dI, c.hidden_size));
    w.q.allocate(copies, sz(2 * H * D, c.hidden_size));
    w.k.allocate(copies, sz(G * D, c.hidden_size));
    w.v.allocate(copies, sz(G * D, c.hidden_size));
    w.o.allocate(copies, sz(c.hidden_size, H * D));
    w.index_qk.fill(FillKind::kBf16, "step.w_index_qk");
    w.q.fill(FillKind::kBf16, "step.w_q");
    w.k.fill(FillKind::kBf16, "step.w_k");
    w.v.fill(FillKind::kBf16, "step.w_v");
    w.o.fill(FillKind::kBf16, "step.w_o");
    out.allocate(copies, sz(T, c.hidden_size));
  } else {
    ps.fill_inputs("step");
  }

  state.SetLabel("path=decode");
  const Timing t = time_launches(state, copies, [&](int k) {
    if (gemms) {
      gpu::launch_projection(make_projection_params(c, T, c.hidden_size, (HI + 1) * dI), hidden.at(k),
                             w.index_qk.at(k), ps.index_qk.at(k), env.stream);
      gpu::launch_projection(make_projection_params(c, T, c.hidden_size, 2 * H * D), hidden.at(k), w.q.at(k),
                             ps.qg.at(k), env.stream);
      gpu::launch_projection(make_projection_params(c, T, c.hidden_size, G * D), hidden.at(k), w.k.at(k),
                             ps.k.at(k), env.stream);
      gpu::launch_projection(make_projection_params(c, T, c.hidden_size, G * D), hidden.at(k), w.v.at(k),
                             ps.v.at(k), env.stream);
    }
    gpu::launch_prepare(pp, layout, ps.args(k), env.stream);

    gpu::launch_select(sp, codes, sl, ps.index_q.at(k), ps.compressed.at(0), ps.token_to_req.at(k), vis.at(k),
                       table_c.at(k), scratch.at(0), ids.at(k), block_scores.at(k), env.stream,
                       gpu::SelectPath::kDecode);
    gpu::ExpandSlots slots;
    slots.token_to_req = ps.token_to_req.at(k);
    slots.seq_lens = lens.at(k);
    slots.block_table = table.at(k);
    slots.num_reqs = dims.num_reqs;
    slots.max_pages = dims.max_pages;
    slots.page_size = c.page_size;
    slots.num_pages = kvp.num_pages;
    slots.token_slots = token_slots.at(k);
    gpu::launch_expand(ep, T, ids.at(k), ps.pos.at(k), token_idx.at(k), env.stream, &slots);

    gpu::SparseAttentionArgs sa;
    sa.q = ps.q.at(k);
    sa.gate = ps.gate.at(k);
    sa.token_idx = token_idx.at(k);
    sa.token_slots = token_slots.at(k);
    sa.token_to_req = ps.token_to_req.at(k);
    sa.seq_lens = lens.at(k);
    sa.block_table = table.at(k);
    sa.k_cache = ps.k_cache.at(0);
    sa.v_cache = ps.v_cache.at(0);
    sa.attn = attn.at(k);
    sa.gated = gated.at(k);
    sa.workspace = ws_floats > 0 ? workspace.at(0) : nullptr;
    sa.workspace_floats = ws_floats;
    gpu::launch_sparse_attention(ap, gp, kvp, dims, sa, env.stream, gpu::kDefaultIdsPerSplit,
                                 gpu::AttentionPath::kDecode);

    if (gemms)
      gpu::launch_projection(make_projection_params(c, T, H * D, c.hidden_size), gated.at(k), w.o.at(k), out.at(k),
                             env.stream);
  });
  set_cost_counters(state, t, cost);
}

void add(const std::string& kind, int batch, int64_t context, bool fp8, bool gemms) {
  register_gpu_benchmark(kind + "/" + decode_name(batch, context) + (fp8 ? "/fp8" : "/bf16"),
                         [shape = decode_shape(batch, context), fp8, gemms](benchmark::State& st) {
                           guarded(st, [&] { bench_step(st, shape, fp8, gemms); });
                         });
}

}  // namespace

void register_step_benchmarks() {
  for (const int64_t ctx : kStepContexts)
    for (const int b : kDecodeBatches) add("step_no_gemm", b, ctx, false, false);
  add("step_no_gemm", kFp8Batch, kFp8Context, true, false);
  for (const int b : kFullStepBatches) add("step", b, kFullStepContext, false, true);
}

}  // namespace qsa::bench
