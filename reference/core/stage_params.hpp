// One params struct per stage: sizes and switches only, no pointers, so the
// fp64 reference, the GPU launchers, trace I/O and the diff all share them.
// make_*_params derive a stage's params from the layer config.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "reference/core/config.hpp"

namespace qsa {

// y[rows, out_dim] = x[rows, in_dim] · w[out_dim, in_dim]^T (no bias).
struct ProjectionParams {
  int64_t rows = 0;
  int in_dim = 0;
  int out_dim = 0;
  bool round_output = false;  // bf16 store of the projection output
};

// Gemma RMSNorm over contiguous vectors of `dim` values (one head each).
struct RmsNormParams {
  int64_t rows = 0;  // tokens * heads
  int dim = 0;
  double eps = 1e-6;
  bool round_output = false;
};

// RoPE / interleaved mRoPE on the first rotary_dim dims of each head.
struct RopeParams {
  int heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;
  double theta = 1e4;
  RopeStyle style = RopeStyle::kNeox;
  std::array<int, 3> mrope_section = {0, 0, 0};
  AngleMode angle = AngleMode::kExact;
  CosSinDtype cos_sin = CosSinDtype::kExact;
  bool per_op_rounding = false;  // hf-eager: three separately rounded bf16 ops
  bool round_output = false;     // one bf16 rounding of each rotated value
};

// Pooling of completed groups into compressed keys and their cache.
struct CompressParams {
  int ratio = 4;           // r
  int dim = 0;             // d_I
  int ring_capacity = 0;   // C
  int rows_per_page = 0;   // P / r
  bool round_storage = false;
  IndexerDtype dtype = IndexerDtype::kBf16;
  Fp8Flavor fp8_flavor = Fp8Flavor::kE4m3fn;
};

// Block scores and top-k.
struct SelectParams {
  int heads = 0;          // H_I
  int dim = 0;            // d_I
  int ratio = 4;          // r
  int blocks_budget = 0;  // K_B
  double score_scale = 1.0;
};

// Expansion of block ids to request-relative token ids.
struct ExpandParams {
  int ratio = 4;
  int budget = 0;             // K
  bool count_column = false;  // row width W + 1 with the count last
  int width() const { return budget + ratio - 1 + (count_column ? 1 : 0); }
};

// The columns of a token-index row of `width` columns that attention reads:
// all of them, or with the count column (vLLM's packed row: the last column)
// the count it holds, clamped to [0, width - 1] (the count is never an id).
inline int64_t attended_columns(const int32_t* ids, int64_t width, bool count_column) {
  return count_column ? std::clamp<int64_t>(ids[width - 1], 0, width - 1) : width;
}

// Paged main KV cache.
struct KvCacheParams {
  KvDtype dtype = KvDtype::kBf16;
  int kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;
  int page_size = 0;
  int64_t num_pages = 0;
  double k_scale = 1.0;
  double v_scale = 1.0;
  Fp8Flavor fp8_flavor = Fp8Flavor::kE4m3fn;
  bool round_storage = false;  // bf16 KV follows the storage-point knob
  int octave_window = 0;
  int octave_sinks = 0;
};

// Sparse (and dense) GQA attention.
struct AttentionParams {
  int heads = 0;       // H
  int kv_heads = 0;    // G
  int head_dim = 0;    // D
  int page_size = 0;
  int index_width = 0;        // columns of the token-index rows
  bool count_column = false;  // last column is the loop bound
  double scale = 1.0;         // D^-1/2
  bool round_logits = false;
  PRounding p_rounding = PRounding::kNone;
  bool round_output = false;  // bf16 store of A before the gate
  bool octave_shadow = false; // attend window/sink tokens from exact shadow copies
  int octave_window = 0;
  int octave_sinks = 0;
};

// Sigmoid gate: O = A ⊙ sigmoid(gate) over the full head width.
struct GateParams {
  bool round_sigmoid = false;
  bool round_output = false;
};

ProjectionParams make_projection_params(const QsaConfig& c, int64_t rows, int in_dim, int out_dim);
RmsNormParams make_rms_norm_params(const QsaConfig& c, int64_t rows, int dim);
RopeParams make_rope_params(const QsaConfig& c, int heads, int head_dim);
CompressParams make_compress_params(const QsaConfig& c);
SelectParams make_select_params(const QsaConfig& c);
ExpandParams make_expand_params(const QsaConfig& c);
KvCacheParams make_kv_cache_params(const QsaConfig& c, int64_t num_pages);
AttentionParams make_attention_params(const QsaConfig& c);
GateParams make_gate_params(const QsaConfig& c);

}  // namespace qsa
