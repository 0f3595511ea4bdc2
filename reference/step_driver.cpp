#include "reference/step_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "reference/attention.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/expand.hpp"
#include "reference/gate.hpp"
#include "reference/mtp_reuse.hpp"
#include "reference/projection.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rope.hpp"
#include "reference/select.hpp"

namespace qsa {

namespace {

// Copies columns [col0, col0 + heads·dim) of a [T, width] matrix into a
// [T, heads, dim] tensor; `stride` > dim skips interleaved data (the gate).
TensorD take_heads(const TensorD& m, int64_t col0, int heads, int dim, int stride) {
  const int64_t T = m.dim(0);
  TensorD out({T, heads, dim});
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      std::copy_n(m.row(t) + col0 + int64_t{h} * stride, dim, &out.at(t, h, 0));
  return out;
}

// Padding rows carry no token: zero them so outputs do not depend on
// whatever the engine left in the padded hidden states.
void zero_padding(const StepLayout& l, TensorD& x) {
  if (x.empty()) return;
  const int64_t w = x.numel() / x.dim(0);
  for (int64_t t = l.num_valid_tokens; t < l.num_tokens; ++t) std::fill_n(x.row(t), w, 0.0);
}

void norm_and_rope(const QsaConfig& c, const StepLayout& l, const TensorD& w, int heads, int dim,
                   TensorD& x) {
  gemma_rms_norm(make_rms_norm_params(c, x.numel() / dim, dim), x, w, x);
  apply_rope(make_rope_params(c, heads, dim), l.rope_pos, x);
}

// Records the wall time since the previous mark under `phase`.
class PhaseClock {
 public:
  explicit PhaseClock(StepOutputs& o) : o_(o), last_(std::chrono::steady_clock::now()) {}
  void mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    o_.seconds.emplace_back(phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  StepOutputs& o_;
  std::chrono::steady_clock::time_point last_;
};

// The value later stages use: the feed's when it recorded one (shape-checked
// against the driver's own), else the driver's.
template <class T>
const Tensor<T>& fed(const Tensor<T>& own, const Tensor<T>* recorded, const char* stage) {
  if (recorded == nullptr || recorded->empty()) return own;
  require_shape(*recorded, own.shape, std::string("recorded ") + stage);
  return *recorded;
}

void check_hidden(const QsaConfig& c, const StepLayout& l, const TensorD& hidden) {
  require_shape(hidden, {l.num_tokens, c.hidden_size}, "hidden states");
}

}  // namespace

StepDriver::StepDriver(const QsaConfig& config, LayerWeights weights, const CacheGeometry& geometry)
    : config_(config),
      weights_(std::move(weights)),
      geometry_(geometry),
      kv_(make_kv_cache_params(config, geometry.num_pages)),
      ring_(geometry.num_ring_blocks, config.ring_capacity(), config.indexer_head_dim),
      compressed_(geometry.num_pages, config.compressed_rows_per_page(), config.indexer_head_dim) {
  validate_config(config_);
  validate_weights(config_, weights_);
}

StepOutputs StepDriver::run(const StepMetadata& meta, const TensorD& hidden, const StageRecord* feed) {
  const QsaConfig& c = config_;
  const LayerWeights& w = weights_;
  StepOutputs o;
  PhaseClock clock(o);
  o.layout = derive_step_layout(c, geometry_, meta);
  const StepLayout& l = o.layout;
  check_hidden(c, l, hidden);
  const int64_t T = l.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim;
  const int H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;

  // 1. Projections.
  TensorD idx, qg, k, v;
  project(make_projection_params(c, T, c.hidden_size, (HI + 1) * dI), hidden, w.index_qk_proj, idx);
  project(make_projection_params(c, T, c.hidden_size, H * 2 * D), hidden, w.q_proj, qg);
  project(make_projection_params(c, T, c.hidden_size, G * D), hidden, w.k_proj, k);
  project(make_projection_params(c, T, c.hidden_size, G * D), hidden, w.v_proj, v);
  o.index_q = take_heads(idx, 0, HI, dI, dI);
  o.raw_keys = TensorD({T, dI});
  for (int64_t t = 0; t < T; ++t) std::copy_n(idx.row(t) + int64_t{HI} * dI, dI, o.raw_keys.row(t));
  o.q = take_heads(qg, 0, H, D, 2 * D);
  o.gate = take_heads(qg, D, H, D, 2 * D);
  // At 32K tokens of qwen4-exp each [T, H, D] tensor is ~2 GB: release the
  // packed projections as soon as they are split.
  idx = TensorD();
  qg = TensorD();
  o.k = TensorD({T, G, D});
  o.k.data = std::move(k.data);
  o.v = TensorD({T, G, D});
  o.v.data = std::move(v.data);
  for (TensorD* x : {&o.index_q, &o.raw_keys, &o.q, &o.gate, &o.k, &o.v}) zero_padding(l, *x);
  clock.mark("projections");

  // 2. Norms, RoPE, indexer dtype.
  const CompressParams cp = make_compress_params(c);
  norm_and_rope(c, l, w.index_q_norm, HI, dI, o.index_q);
  for (double& x : o.index_q.data) x = quantize_indexer(cp, x);
  norm_and_rope(c, l, w.q_norm, H, D, o.q);
  norm_and_rope(c, l, w.k_norm, G, D, o.k);
  clock.mark("norm+rope");

  // 3. Main KV cache writes (before attention: a chunk attends to itself).
  const TensorD& k_used = fed(o.k, feed ? &feed->k : nullptr, "k");
  const TensorD& v_used = fed(o.v, feed ? &feed->v : nullptr, "v");
  for (int64_t t = 0; t < l.num_valid_tokens; ++t)
    kv_.write(l.main_slot[t], l.pos[t], k_used.row(t), v_used.row(t));

  // 4-5. Pool completed groups from the pre-step ring, then update the ring.
  const TensorD& raw_used = fed(o.raw_keys, feed ? &feed->raw_keys : nullptr, "raw_keys");
  o.compressed = compress_completed_groups(cp, make_rms_norm_params(c, 1, dI), make_rope_params(c, 1, dI),
                                           w.index_k_norm, l, raw_used, ring_, compressed_);
  if (feed != nullptr && !feed->comp_keys.empty()) overwrite_compressed_rows(*feed, compressed_);
  write_ring(l, raw_used, ring_);
  clock.mark("caches+pooling");

  // 6. Selection.
  const ExpandParams ep = make_expand_params(c);
  if (l.mtp_reuse) {
    reuse_mtp_rows(l, mtp_, c.count_column, o.block_ids, o.block_scores, o.token_idx);
  } else {
    const SelectParams sp = make_select_params(c);
    o.block_ids = TensorI32({T, sp.blocks_budget}, -1);
    o.block_scores = TensorD({T, sp.blocks_budget}, -std::numeric_limits<double>::infinity());
    const TensorD& index_q_used = fed(o.index_q, feed ? &feed->index_q : nullptr, "index_q");
    for (int i = 0; i < l.num_reqs; ++i) {
      int32_t max_visible = 0;
      for (int64_t t = l.row_begin(i); t < l.row_end(i); ++t)
        max_visible = std::max(max_visible, l.visible_blocks[t]);
      const TensorD kc = gather_compressed_keys(l, i, max_visible, compressed_);
      select_rows(sp, index_q_used, l.visible_blocks, l.row_begin(i), l.row_end(i), kc, o.block_ids,
                  o.block_scores);
    }
    const TensorI32& ids_used = fed(o.block_ids, feed ? &feed->block_ids : nullptr, "block_ids");
    expand_rows(ep, ids_used, l.pos, o.token_idx);
    if (l.num_reqs > 0)
      mtp_ = save_mtp_rows(l, ids_used, fed(o.block_scores, feed ? &feed->block_scores : nullptr, "block_scores"),
                           fed(o.token_idx, feed ? &feed->token_idx : nullptr, "token_idx"));
  }

  clock.mark("select+expand");

  // 7. Attention, gate, output projection.
  sparse_attention(make_attention_params(c), fed(o.q, feed ? &feed->q : nullptr, "q"),
                   fed(o.token_idx, feed ? &feed->token_idx : nullptr, "token_idx"), l, kv_, o.attn);
  clock.mark("attention");
  apply_gate(make_gate_params(c), fed(o.attn, feed ? &feed->attn : nullptr, "attn"),
             fed(o.gate, feed ? &feed->gate : nullptr, "gate"), o.gated);
  // o_proj reads the gated heads [T, H, D] as one row-major [T, H·D] matrix.
  const TensorD& gated_in = fed(o.gated, feed ? &feed->gated : nullptr, "gated");
  project_rows(make_projection_params(c, T, H * D, c.hidden_size), gated_in.ptr(), w.o_proj, o.out);
  clock.mark("gate+o_proj");
  return o;
}

}  // namespace qsa
