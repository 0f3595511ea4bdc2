#include "gpu/step/step_transfer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "gpu/common/poison.hpp"
#include "reference/core/float_formats.hpp"

namespace qsa::gpu {

namespace {

size_t sz(int64_t a, int64_t b = 1, int64_t c = 1) { return static_cast<size_t>(a * b * c); }

DeviceBuffer<uint16_t> bf16_buffer(const TensorD& x) {
  std::vector<uint16_t> bits(x.data.size());
  std::transform(x.data.begin(), x.data.end(), bits.begin(), [](double v) { return bf16_bits(v); });
  return DeviceBuffer<uint16_t>(bits);
}

DeviceBuffer<float> float_buffer(const TensorD& x) {
  std::vector<float> f(x.data.begin(), x.data.end());
  return DeviceBuffer<float>(f);
}

template <class T>
DeviceBuffer<T> poisoned(size_t n, uint32_t pattern) {
  DeviceBuffer<T> b(n);
  b.poison(pattern);
  return b;
}

TensorD from_bf16(const DeviceBuffer<uint16_t>& buf, Shape shape) {
  const std::vector<uint16_t> bits = buf.download();
  TensorD t(std::move(shape));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = bf16_value(bits[i]);
  return t;
}

TensorD from_float(const std::vector<float>& f, Shape shape) {
  TensorD t(std::move(shape));
  std::copy_n(f.begin(), t.data.size(), t.data.begin());
  return t;
}

}  // namespace

DeviceWeights upload_weights(const LayerWeights& w) {
  return DeviceWeights{bf16_buffer(w.index_qk_proj), bf16_buffer(w.q_proj),       bf16_buffer(w.k_proj),
                       bf16_buffer(w.v_proj),        bf16_buffer(w.o_proj),       float_buffer(w.index_q_norm),
                       float_buffer(w.index_k_norm), float_buffer(w.q_norm),      float_buffer(w.k_norm)};
}

void check_slot(int64_t slot, size_t slots, const char* cache) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots)
    throw InputError(fmt::format("initial state: {} slot {} is out of range (the cache has {} slots)", cache, slot,
                                 slots));
}

StepBuffers::StepBuffers(const QsaConfig& cfg, const StepLayout& lay)
    : c(cfg),
      l(lay),
      token_to_req(lay.token_to_req),
      visible(lay.visible_blocks),
      pos(lay.pos),
      main_slot(lay.main_slot),
      ring_slot(lay.ring_slot),
      compressed_slot(lay.compressed_slot),
      rope_pos(lay.rope_pos.data),
      starts(lay.starts),
      seq_lens(lay.seq_lens),
      ring_blocks(lay.ring_blocks),
      block_table(lay.block_table.data),
      block_table_c(lay.block_table_c.data) {
  const int64_t T = l.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  hidden = DeviceBuffer<uint16_t>(sz(T, c.hidden_size));
  index_qk = poisoned<float>(sz(T, (HI + 1) * dI), kPoisonFloat);
  qg = poisoned<float>(sz(T, 2 * H * D), kPoisonFloat);
  k_proj = poisoned<float>(sz(T, G * D), kPoisonFloat);
  v_proj = poisoned<float>(sz(T, G * D), kPoisonFloat);
  index_q = poisoned<uint8_t>(sz(T, HI * dI, c.indexer_dtype == IndexerDtype::kFp8 ? 1 : 2), kPoisonBf16Pair);
  q = poisoned<uint16_t>(sz(T, H * D), kPoisonBf16Pair);
  k = poisoned<uint16_t>(sz(T, G * D), kPoisonBf16Pair);
  gate = poisoned<uint16_t>(sz(T, H * D), kPoisonBf16Pair);
  block_ids = poisoned<int32_t>(sz(T, c.blocks_budget()), kPoisonId);
  block_scores = poisoned<float>(sz(T, c.blocks_budget()), kPoisonFloat);
  token_idx = poisoned<int32_t>(sz(T, c.index_row_width()), kPoisonId);
  token_slots = poisoned<int32_t>(sz(T, c.index_row_width()), kPoisonId);
  attn = poisoned<float>(sz(T, H * D), kPoisonFloat);
  gated = poisoned<uint16_t>(sz(T, H * D), kPoisonBf16Pair);
  out = poisoned<float>(sz(T, c.hidden_size), kPoisonFloat);
}

void StepBuffers::upload_hidden(const TensorD& x, int64_t num_valid) {
  std::vector<uint16_t> bits(x.data.size(), 0);
  const size_t valid = sz(num_valid, c.hidden_size);
  for (size_t i = 0; i < valid; ++i) bits[i] = bf16_bits(x.data[i]);
  hidden.upload(bits);
}

PrepareLayout StepBuffers::prepare_layout(const DeviceCaches& caches) const {
  PrepareLayout p;
  p.num_tokens = l.num_tokens;
  p.num_reqs = l.num_reqs;
  p.num_ring_slots = static_cast<int64_t>(caches.tags.ring.size());
  p.num_compressed_rows = static_cast<int64_t>(caches.tags.compressed.size());
  p.num_kv_slots = static_cast<int64_t>(caches.tags.kv.size());
  return p;
}

PrepareArgs StepBuffers::prepare_args(const DeviceWeights& w, DeviceCaches& caches) {
  PrepareArgs a;
  a.index_qk = index_qk.get();
  a.qg = qg.get();
  a.k = k_proj.get();
  a.v = v_proj.get();
  a.index_q_norm_w = w.index_q_norm.get();
  a.index_k_norm_w = w.index_k_norm.get();
  a.q_norm_w = w.q_norm.get();
  a.k_norm_w = w.k_norm.get();
  a.token_to_req = token_to_req.get();
  a.pos = pos.get();
  a.rope_pos = rope_pos.get();
  a.main_slot = main_slot.get();
  a.ring_slot = ring_slot.get();
  a.compressed_slot = compressed_slot.get();
  a.starts = starts.get();
  a.ring_blocks = ring_blocks.get();
  a.ring_keys = caches.ring_keys.get();
  a.ring_rope = caches.ring_rope.get();
  a.compressed = caches.compressed.get();
  a.k_cache = caches.k.get();
  a.v_cache = caches.v.get();
  a.index_q = index_q.get();
  a.q = q.get();
  a.k_out = k.get();
  a.gate = gate.get();
  return a;
}

SparseAttentionArgs StepBuffers::attention_args(DeviceCaches& caches, DeviceBuffer<float>& workspace) {
  SparseAttentionArgs a;
  a.q = q.get();
  a.gate = gate.get();
  a.token_idx = token_idx.get();
  a.token_to_req = token_to_req.get();
  a.seq_lens = seq_lens.get();
  a.block_table = block_table.get();
  a.k_cache = caches.k.get();
  a.v_cache = caches.v.get();
  a.attn = attn.get();
  a.gated = gated.get();
  a.workspace = workspace.get();
  a.workspace_floats = workspace.size();
  return a;
}

PrefillPlanBuffers upload_prefill_plan(const SparseAttentionPrefillPlan& plan, SparseAttentionArgs& args) {
  PrefillPlanBuffers b{DeviceBuffer<int32_t>(plan.tiles), DeviceBuffer<int32_t>(plan.ids),
                       DeviceBuffer<uint32_t>(plan.masks)};
  args.prefill_tiles = b.tiles.get();
  args.prefill_ids = b.ids.get();
  args.prefill_masks = b.masks.get();
  args.prefill_num_tiles = plan.num_tiles();
  args.prefill_num_entries = plan.num_entries();
  args.prefill_rows_per_tile = plan.rows_per_tile;
  args.prefill_row_ids = plan.row_ids;
  return b;
}

namespace {

TensorI32 download_rows(const DeviceBuffer<int32_t>& rows, int64_t num_tokens, int width) {
  TensorI32 t({num_tokens, width});
  const std::vector<int32_t> values = rows.download();
  std::copy_n(values.begin(), t.data.size(), t.data.begin());
  return t;
}

}  // namespace

TensorI32 StepBuffers::download_token_idx(int width) const { return download_rows(token_idx, l.num_tokens, width); }

TensorI32 StepBuffers::download_token_slots(int width) const {
  return download_rows(token_slots, l.num_tokens, width);
}

ExpandSlots StepBuffers::expand_slots(int64_t num_pages) {
  ExpandSlots s;
  s.token_to_req = token_to_req.get();
  s.seq_lens = seq_lens.get();
  s.block_table = block_table.get();
  s.num_reqs = l.num_reqs;
  s.max_pages = static_cast<int>(l.block_table.dim(1));
  s.page_size = c.page_size;
  s.num_pages = num_pages;
  s.token_slots = token_slots.get();
  return s;
}

void StepBuffers::download_outputs(const DeviceCaches& caches, StepOutputs& o) const {
  const int64_t T = l.num_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const std::vector<uint8_t> iq = index_q.download();
  o.index_q = TensorD({T, HI, dI});
  for (int64_t i = 0; i < o.index_q.numel(); ++i) o.index_q.data[static_cast<size_t>(i)] = decode_indexer(c, iq.data(), i);
  const std::vector<float> proj = index_qk.download();
  o.raw_keys = TensorD({T, dI});
  for (int64_t t = 0; t < T; ++t)
    std::copy_n(proj.begin() + (t * (HI + 1) + HI) * dI, dI, o.raw_keys.row(t));
  o.q = from_bf16(q, {T, H, D});
  o.k = from_bf16(k, {T, G, D});
  o.v = from_float(v_proj.download(), {T, G, D});
  o.gate = from_bf16(gate, {T, H, D});
  o.block_ids = TensorI32({T, c.blocks_budget()});
  const std::vector<int32_t> ids = block_ids.download();
  std::copy_n(ids.begin(), o.block_ids.data.size(), o.block_ids.data.begin());
  o.block_scores = from_float(block_scores.download(), {T, c.blocks_budget()});
  o.attn = from_float(attn.download(), {T, H, D});
  o.gated = from_bf16(gated, {T, H, D});
  o.out = from_float(out.download(), {T, c.hidden_size});
  // The step's compressed rows, read back from the cache (cache_tags.hpp
  // records which tokens completed a group).
  for (int64_t t = 0; t < l.num_valid_tokens; ++t) {
    const int64_t slot = l.compressed_slot[static_cast<size_t>(t)];
    if (slot < 0) continue;
    o.compressed.token.push_back(static_cast<int32_t>(t));
    o.compressed.block.push_back(l.pos[static_cast<size_t>(t)] / c.compress_ratio);
    o.compressed.slot.push_back(slot);
  }
  const auto n = static_cast<int64_t>(o.compressed.slot.size());
  o.compressed.keys = TensorD({n, dI});
  for (int64_t i = 0; i < n; ++i) caches.read_compressed(o.compressed.slot[static_cast<size_t>(i)], o.compressed.keys.row(i));
}

}  // namespace qsa::gpu
