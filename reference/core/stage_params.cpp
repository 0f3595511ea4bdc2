#include "reference/core/stage_params.hpp"

namespace qsa {

ProjectionParams make_projection_params(const QsaConfig& c, int64_t rows, int in_dim, int out_dim) {
  return {rows, in_dim, out_dim, c.precision.round_storage};
}

RmsNormParams make_rms_norm_params(const QsaConfig& c, int64_t rows, int dim) {
  return {rows, dim, c.rms_norm_eps, c.precision.round_storage};
}

RopeParams make_rope_params(const QsaConfig& c, int heads, int head_dim) {
  RopeParams p;
  p.heads = heads;
  p.head_dim = head_dim;
  p.rotary_dim = c.rotary_dim;
  p.theta = c.rope_theta;
  p.style = c.rope_style;
  p.mrope_section = c.mrope_section;
  p.angle = c.precision.angle;
  p.cos_sin = c.precision.cos_sin;
  p.per_op_rounding = c.precision.rope_per_op_rounding;
  p.round_output = c.precision.round_storage;
  return p;
}

CompressParams make_compress_params(const QsaConfig& c) {
  CompressParams p;
  p.ratio = c.compress_ratio;
  p.dim = c.indexer_head_dim;
  p.ring_capacity = c.ring_capacity();
  p.rows_per_page = c.compressed_rows_per_page();
  p.round_storage = c.precision.round_storage;
  p.dtype = c.indexer_dtype;
  p.fp8_flavor = c.fp8_flavor;
  return p;
}

SelectParams make_select_params(const QsaConfig& c) {
  return {c.indexer_heads, c.indexer_head_dim, c.compress_ratio, c.blocks_budget(), c.index_score_scale()};
}

ExpandParams make_expand_params(const QsaConfig& c) { return {c.compress_ratio, c.budget, c.count_column}; }

KvCacheParams make_kv_cache_params(const QsaConfig& c, int64_t num_pages) {
  KvCacheParams p;
  p.dtype = c.kv_dtype;
  p.kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.rotary_dim = c.rotary_dim;
  p.page_size = c.page_size;
  p.num_pages = num_pages;
  p.k_scale = c.k_scale;
  p.v_scale = c.v_scale;
  p.fp8_flavor = c.fp8_flavor;
  p.round_storage = c.precision.round_storage;
  p.octave_window = c.octave_window;
  p.octave_sinks = c.octave_sinks;
  return p;
}

AttentionParams make_attention_params(const QsaConfig& c) {
  AttentionParams p;
  p.heads = c.num_heads;
  p.kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.page_size = c.page_size;
  p.index_width = c.index_row_width();
  p.count_column = c.count_column;
  p.scale = c.attention_scale();
  p.round_logits = c.precision.round_logits_bf16;
  p.p_rounding = c.precision.p_rounding;
  p.round_output = c.precision.round_storage;
  p.octave_shadow = c.kv_is_octave();
  p.octave_window = c.octave_window;
  p.octave_sinks = c.octave_sinks;
  return p;
}

GateParams make_gate_params(const QsaConfig& c) {
  return {c.precision.round_sigmoid_bf16, c.precision.round_storage};
}

}  // namespace qsa
