#include "gpu/step/gpu_step_driver.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/expand/expand.hpp"
#include "gpu/mtp/mtp_reuse.hpp"
#include "gpu/prepare/prepare.hpp"
#include "gpu/projection/projection.hpp"
#include "gpu/select/select.hpp"
#include "gpu/step/device_caches.hpp"
#include "gpu/step/step_transfer.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::gpu {

void check_gpu_supported(const QsaConfig& c) {
  validate_config(c);
  if (!c.precision.round_storage)
    throw ConfigError(fmt::format("the GPU backend stores activations in bf16, but profile '{}' keeps them unrounded "
                                  "(precision.round_storage off): replay this trace with --backend reference, or "
                                  "use --profile engine for a what-if",
                                  to_string(c.profile)));
  if (c.kv_dtype != KvDtype::kBf16 && c.kv_dtype != KvDtype::kFp8)
    throw ConfigError(fmt::format("the GPU backend has no kernel for kv_dtype '{}' (bf16 and fp8 only)",
                                  to_string(c.kv_dtype)));
  check_sparse_attention_params(make_attention_params(c), make_kv_cache_params(c, 1));
  check_select_params(make_select_params(c), IndexerCodes{c.indexer_dtype, c.fp8_flavor});
}

struct GpuStepDriver::Impl {
  Impl(const QsaConfig& c, const LayerWeights& w, const CacheGeometry& g)
      : config(c), geometry(g), weights(upload_weights(w)), caches(c, g) {
    QSA_GPU_CHECK(hipStreamCreate(&stream));
  }
  ~Impl() { (void)hipStreamDestroy(stream); }

  QsaConfig config;
  CacheGeometry geometry;
  DeviceWeights weights;
  DeviceCaches caches;
  hipStream_t stream = nullptr;
  // MTP rows of the last selecting step, one per request (gpu/mtp).
  DeviceBuffer<int32_t> saved_ids;
  DeviceBuffer<float> saved_scores;
  DeviceBuffer<int32_t> saved_idx;
  int saved_rows = 0;
};

namespace {

// Phase wall times: the stream is drained at each mark so that a phase's
// kernels are charged to it.
class PhaseClock {
 public:
  PhaseClock(StepOutputs& o, hipStream_t s) : o_(o), s_(s), last_(std::chrono::steady_clock::now()) {}
  void mark(const char* phase) {
    QSA_GPU_CHECK(hipStreamSynchronize(s_));
    const auto now = std::chrono::steady_clock::now();
    o_.seconds.emplace_back(phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  StepOutputs& o_;
  hipStream_t s_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

GpuStepDriver::GpuStepDriver(const QsaConfig& config, const LayerWeights& weights, const CacheGeometry& geometry) {
  check_gpu_supported(config);
  validate_weights(config, weights);
  impl_ = std::make_unique<Impl>(config, weights, geometry);
}

GpuStepDriver::~GpuStepDriver() = default;

const QsaConfig& GpuStepDriver::config() const { return impl_->config; }

void GpuStepDriver::write_kv(int64_t slot, int64_t position, const double* k, const double* v) {
  check_slot(slot, impl_->caches.tags.kv.size(), "main KV");
  impl_->caches.write_kv(slot, position, k, v);
}

void GpuStepDriver::write_ring(int64_t slot, int64_t position, const int64_t rope3[3], const double* key) {
  check_slot(slot, impl_->caches.tags.ring.size(), "raw-key ring");
  impl_->caches.write_ring(slot, position, rope3, key);
}

void GpuStepDriver::write_compressed(int64_t slot, int64_t block, const double* key) {
  check_slot(slot, impl_->caches.tags.compressed.size(), "compressed cache");
  impl_->caches.write_compressed(slot, block, key);
}

StepOutputs GpuStepDriver::run(const StepMetadata& meta, const TensorD& hidden) {
  Impl& s = *impl_;
  const QsaConfig& c = s.config;
  StepOutputs o;
  PhaseClock clock(o, s.stream);
  o.layout = derive_step_layout(c, s.geometry, meta);
  const StepLayout& l = o.layout;
  require_shape(hidden, {l.num_tokens, c.hidden_size}, "hidden states");
  const int64_t T = l.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim;
  const int H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  StepBuffers b(c, l);

  // 1. Projections (padding rows enter as zeros, so they leave as zeros).
  b.upload_hidden(hidden, l.num_valid_tokens);
  launch_projection(make_projection_params(c, T, c.hidden_size, (HI + 1) * dI), b.hidden.get(),
                    s.weights.index_qk.get(), b.index_qk.get(), s.stream);
  launch_projection(make_projection_params(c, T, c.hidden_size, 2 * H * D), b.hidden.get(), s.weights.q.get(),
                    b.qg.get(), s.stream);
  launch_projection(make_projection_params(c, T, c.hidden_size, G * D), b.hidden.get(), s.weights.k.get(),
                    b.k_proj.get(), s.stream);
  launch_projection(make_projection_params(c, T, c.hidden_size, G * D), b.hidden.get(), s.weights.v.get(),
                    b.v_proj.get(), s.stream);
  clock.mark("projections");

  // 2. Prepare: reads the ring as it stood before the step, then the tags
  //    take the step's writes.
  const PrepareParams pp = make_prepare_params(c, s.geometry.num_pages);
  validate_prepare(pp, l, s.caches.tags.ring);
  launch_prepare(pp, b.prepare_layout(s.caches), b.prepare_args(s.weights, s.caches), s.stream);
  s.caches.tags.record_step(l);
  clock.mark("prepare");

  // 3. Selection and expansion, or the saved MTP rows. Expand writes each
  //    id's cache slot beside it where the slots fit int32 (the MTP rows
  //    carry ids only): the attention's spread kernel then reads no table.
  const int KB = c.blocks_budget(), width = c.index_row_width();
  const bool slots = !l.mtp_reuse && slot_ids_fit_int32(s.geometry.num_pages, c.page_size);
  if (l.mtp_reuse) {
    // No saved rows, or a row of a request step 0 did not save: InputError.
    validate_mtp_reuse(l.token_to_req, s.saved_rows);
    launch_mtp_reuse(T, KB, width, c.count_column, b.token_to_req.get(), s.saved_ids.get(), s.saved_scores.get(),
                     s.saved_idx.get(), b.block_ids.get(), b.block_scores.get(), b.token_idx.get(), s.stream);
  } else {
    s.caches.tags.check_selection_reads(l);
    const SelectParams sp = make_select_params(c);
    const IndexerCodes codes{c.indexer_dtype, c.fp8_flavor};
    const SelectLayout sl = validate_select(sp, codes, s.geometry.num_pages, c.compressed_rows_per_page(),
                                            l.token_to_req, l.visible_blocks, l.block_table_c);
    DeviceBuffer<float> scratch(select_scratch_floats(sl));
    select_zero_row_hist(sl, scratch.get(), s.stream);
    launch_select(sp, codes, sl, b.index_q.get(), s.caches.compressed.get(), b.token_to_req.get(),
                  b.visible.get(), b.block_table_c.get(), scratch.get(), b.block_ids.get(), b.block_scores.get(),
                  s.stream);
    const ExpandSlots expand_slots = b.expand_slots(s.geometry.num_pages);
    launch_expand(make_expand_params(c), T, b.block_ids.get(), b.pos.get(), b.token_idx.get(), s.stream,
                  slots ? &expand_slots : nullptr);
    if (l.num_reqs > 0) {
      const std::vector<int32_t> last_row = mtp_last_rows(l);
      validate_mtp_save(last_row, T);
      DeviceBuffer<int32_t> d_last(last_row);
      s.saved_ids = DeviceBuffer<int32_t>(static_cast<size_t>(l.num_reqs) * static_cast<size_t>(KB));
      s.saved_scores = DeviceBuffer<float>(s.saved_ids.size());
      s.saved_idx = DeviceBuffer<int32_t>(static_cast<size_t>(l.num_reqs) * static_cast<size_t>(width));
      launch_mtp_save(l.num_reqs, KB, width, d_last.get(), b.block_ids.get(), b.block_scores.get(),
                      b.token_idx.get(), s.saved_ids.get(), s.saved_scores.get(), s.saved_idx.get(), s.stream);
      QSA_GPU_CHECK(hipStreamSynchronize(s.stream));  // d_last dies here
      s.saved_rows = l.num_reqs;
    }
  }
  clock.mark("select+expand");

  // 4. Attention and gate: the ids came from the device, so the host checks
  //    them (bounds and cache tags) before the kernel reads through them.
  o.token_idx = b.download_token_idx(width);
  s.caches.tags.check_attention_reads(l, o.token_idx, c.count_column);
  const AttentionParams ap = make_attention_params(c);
  const KvCacheParams kvp = make_kv_cache_params(c, s.geometry.num_pages);
  const SparseAttentionDims dims =
      validate_sparse_attention(ap, kvp, o.token_idx, l.token_to_req, l.seq_lens, l.block_table);
  const int ids_per_split = sparse_attention_ids_per_split(ap, dims);
  DeviceBuffer<float> workspace(sparse_attention_workspace_floats(ap, dims, ids_per_split));
  SparseAttentionArgs args = b.attention_args(s.caches, workspace);
  if (slots) {  // checked as the ids are: the kernel reads K and V through them
    validate_token_slots(ap, kvp, o.token_idx, l.token_to_req, l.seq_lens, l.block_table,
                         b.download_token_slots(width));
    args.token_slots = b.token_slots.get();
  }
  // Prefill-shaped steps (several rows per request) may take the path where
  // neighbouring rows share K/V loads; it needs a host-built plan, and kAuto
  // decides from it (resolve_attention_path: where the build has the
  // tensor-core decode kernel, only a tensor-core prefill kernel on a plan
  // whose rows share enough of their selections beats it). No plan where
  // kAuto cannot take the prefill path (auto_may_take_prefill).
  PrefillPlanBuffers plan;
  const bool prefill_shaped =
      l.num_reqs > 0 && l.num_valid_tokens >= int64_t{kPrefillRowsPerRequest} * l.num_reqs;
  if (prefill_shaped && auto_may_take_prefill(ap, kvp.dtype)) {
    plan = upload_prefill_plan(plan_sparse_attention_prefill(ap, dims, o.token_idx, l.token_to_req, l.seq_lens,
                                                             l.block_table),
                               args);
    clock.mark("prefill plan");
  }
  const AttentionPath path = resolve_attention_path(ap, kvp.dtype, dims, args, AttentionPath::kAuto);
  launch_sparse_attention(ap, make_gate_params(c), kvp, dims, args, s.stream, ids_per_split, path);
  // The phase names the path, so that readers of StepOutputs::seconds (the tests) see which kernel ran.
  clock.mark(is_prefill_path(path) ? "attention+gate (prefill path)" : "attention+gate");

  // 5. o_proj reads the gated heads [T, H, D] as one [T, H·D] matrix.
  launch_projection(make_projection_params(c, T, H * D, c.hidden_size), b.gated.get(), s.weights.o.get(),
                    b.out.get(), s.stream);
  clock.mark("o_proj");

  b.download_outputs(s.caches, o);
  return o;
}

}  // namespace qsa::gpu
