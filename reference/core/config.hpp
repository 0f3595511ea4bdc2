// QsaConfig: every field of spec section 1 plus every variant switch that
// differs between engines, so a trace from any engine can be replayed
// faithfully. Presets: "qwen4-exp" (the released model) and "tiny" (tests).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "reference/core/fp8.hpp"
#include "reference/core/octave.hpp"

namespace qsa {

enum class RopeStyle { kNeox, kGptj };
// Block-score scale s: 1/sqrt(d_I) (HF, SGLang, older vLLM) or 1 (current
// vLLM NVIDIA kernels). Rankings agree; recorded logits do not.
enum class ScoreScale { kInvSqrtDim, kOne };
enum class KvDtype { kBf16, kFp8, kOctaveK3V4, kOctaveK3V3, kOctaveK3V3Compact };
enum class IndexerDtype { kBf16, kFp8 };

// How RoPE angles position * inv_freq are formed (spec section 3).
enum class AngleMode {
  kExact,             // fp64 inv_freq and product
  kFp32,              // inv_freq = f32(1 / f32(theta^(2j/R))), angle = f32(f32(pos) * inv_freq)
  kFp32Bf16InvFreq,   // as kFp32 with inv_freq rounded to bf16 (a model cast with .to(bf16))
};
enum class CosSinDtype { kExact, kFp32, kBf16 };
// Rounding of attention probabilities before the PV product.
enum class PRounding {
  kNone,
  kBf16Unnormalized,  // engines: exp(s - max) rounded to bf16, row sum kept unrounded
  kBf16Normalized,    // transformers eager: softmax output rounded to bf16
};

// Independent precision knobs (spec section 11). Profiles are presets over them.
struct PrecisionKnobs {
  bool round_storage = false;          // bf16 at the storage points of spec section 11
  AngleMode angle = AngleMode::kExact;
  CosSinDtype cos_sin = CosSinDtype::kExact;
  bool rope_per_op_rounding = false;   // x*cos, rot(x)*sin and their sum each rounded to bf16
  bool round_logits_bf16 = false;      // QK^T (main attention) rounded to bf16
  PRounding p_rounding = PRounding::kNone;
  bool round_sigmoid_bf16 = false;     // sigmoid(gate) rounded to bf16 before the product
};

enum class PrecisionProfile { kExact, kEngine, kHfEager, kCustom };
PrecisionKnobs knobs_for_profile(PrecisionProfile profile);

struct QsaConfig {
  // ---- model (spec section 1) ----
  int hidden_size = 2560;
  int num_heads = 24;          // H
  int num_kv_heads = 2;        // G
  int head_dim = 256;          // D
  int rotary_dim = 64;         // R, applies to main Q/K and to the indexer
  double rope_theta = 1e7;
  std::array<int, 3> mrope_section = {11, 11, 10};  // interleaved (t, h, w) pairs; sums to R/2
  RopeStyle rope_style = RopeStyle::kNeox;
  double rms_norm_eps = 1e-6;
  int indexer_heads = 4;       // H_I
  int indexer_kv_heads = 1;    // every implementation requires 1
  int indexer_head_dim = 128;  // d_I
  int budget = 2048;           // K, token budget; multiple of compress_ratio
  int compress_ratio = 4;      // r

  // ---- serving ----
  int page_size = 1600;        // P: multiple of 16, divisible by r
  int speculative_tokens = 0;  // S

  // ---- engine variants ----
  ScoreScale score_scale = ScoreScale::kInvSqrtDim;
  Fp8Flavor fp8_flavor = Fp8Flavor::kE4m3fn;
  bool count_column = false;   // vLLM NVIDIA packed row: width W + 1, last column = count
  PrecisionProfile profile = PrecisionProfile::kEngine;
  PrecisionKnobs precision = knobs_for_profile(PrecisionProfile::kEngine);
  KvDtype kv_dtype = KvDtype::kBf16;
  double k_scale = 1.0;        // fp8 KV: stored fp8(k / k_scale)
  double v_scale = 1.0;
  IndexerDtype indexer_dtype = IndexerDtype::kBf16;
  int octave_window = 64;      // exact shadow copies of the most recent positions
  int octave_sinks = 4;        // and of the first positions

  // ---- derived ----
  int blocks_budget() const { return budget / compress_ratio; }   // K_B
  int row_width() const { return budget + compress_ratio - 1; }   // W (without count column)
  int index_row_width() const { return row_width() + (count_column ? 1 : 0); }
  int gqa_group() const { return num_heads / num_kv_heads; }
  int compressed_rows_per_page() const { return page_size / compress_ratio; }
  int ring_capacity() const;   // C of spec section 4
  double attention_scale() const;
  double index_score_scale() const;
  bool kv_is_octave() const;
};

// Sets `profile` and overwrites `precision` with its knobs.
void apply_profile(QsaConfig& config, PrecisionProfile profile);

QsaConfig config_preset(std::string_view name);  // ConfigError for an unknown name
std::vector<std::string> config_preset_names();

// Throws ConfigError naming the first impossible field or combination.
void validate_config(const QsaConfig& config);

OctaveFormat octave_format(KvDtype dtype);  // requires kv_is_octave

// Stable names used by the CLI, traces and reports.
std::string to_string(RopeStyle v);
std::string to_string(ScoreScale v);
std::string to_string(Fp8Flavor v);
std::string to_string(KvDtype v);
std::string to_string(IndexerDtype v);
std::string to_string(AngleMode v);
std::string to_string(CosSinDtype v);
std::string to_string(PRounding v);
std::string to_string(PrecisionProfile v);

// Parsers throw ConfigError listing the accepted names.
RopeStyle parse_rope_style(std::string_view s);
ScoreScale parse_score_scale(std::string_view s);
Fp8Flavor parse_fp8_flavor(std::string_view s);
KvDtype parse_kv_dtype(std::string_view s);
IndexerDtype parse_indexer_dtype(std::string_view s);
AngleMode parse_angle_mode(std::string_view s);
CosSinDtype parse_cos_sin_dtype(std::string_view s);
PRounding parse_p_rounding(std::string_view s);
PrecisionProfile parse_precision_profile(std::string_view s);

// One line per field, "name = value", for summaries and reports.
std::string describe_config(const QsaConfig& config);

}  // namespace qsa
