// Shared by the trace I/O tests: a full trace built in memory (tiny preset
// with non-default variants, random weights, an initial cache state, three
// steps with [T], [1, T] and [3, T] positions and every recorded output) and a
// per-test scratch directory.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "harness/trace/trace.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/weights.hpp"

namespace qsa::testing_support {

constexpr uint64_t kTraceSeed = 20240611;

// How generated float values are made.
enum class Values { kBf16Exact, kFloat64 };

inline double draw(const CounterRng& rng, uint64_t i, Values values) {
  const double x = rng.normal(i);
  return values == Values::kBf16Exact ? round_bf16(x) : x;
}

inline TensorD random_floats(const Shape& shape, uint64_t seed, const std::string& name, Values values) {
  TensorD t(shape);
  const CounterRng rng(seed, name);
  for (int64_t i = 0; i < t.numel(); ++i) t.data[i] = draw(rng, static_cast<uint64_t>(i), values);
  return t;
}

// Random ints in [lo, hi).
template <class T>
Tensor<T> random_ints(const Shape& shape, uint64_t seed, const std::string& name, int64_t lo, int64_t hi) {
  Tensor<T> t(shape);
  const CounterRng rng(seed, name);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data[i] = static_cast<T>(lo + static_cast<int64_t>(rng.bits(static_cast<uint64_t>(i)) % static_cast<uint64_t>(hi - lo)));
  return t;
}

// A config where every field differs from the tiny preset's default, so a
// reader that drops or swaps one is caught.
inline QsaConfig variant_config() {
  QsaConfig c = config_preset("tiny");
  c.rope_theta = 12345.5;
  c.rms_norm_eps = 1e-5;
  c.mrope_section = {4, 2, 2};
  c.rope_style = RopeStyle::kGptj;
  c.speculative_tokens = 2;
  c.score_scale = ScoreScale::kOne;
  c.fp8_flavor = Fp8Flavor::kE4m3fnuz;
  c.count_column = true;
  c.profile = PrecisionProfile::kCustom;
  c.precision.round_storage = true;
  c.precision.angle = AngleMode::kFp32Bf16InvFreq;
  c.precision.cos_sin = CosSinDtype::kFp32;
  c.precision.rope_per_op_rounding = true;
  c.precision.round_logits_bf16 = true;
  c.precision.p_rounding = PRounding::kBf16Normalized;
  c.precision.round_sigmoid_bf16 = true;
  c.kv_dtype = KvDtype::kFp8;
  c.k_scale = 0.5;
  c.v_scale = 2.0;
  c.octave_window = 32;
  c.octave_sinks = 2;
  return c;
}

inline RecordedStages random_outputs(const QsaConfig& c, int64_t T, int64_t n, uint64_t seed,
                                     const std::string& step, Values values) {
  const int64_t HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads,
                D = c.head_dim, KB = c.blocks_budget();
  const auto f = [&](const char* name, const Shape& s) { return random_floats(s, seed, step + name, values); };
  RecordedStages r;
  r.index_q = f("index_q", {T, HI, dI});
  r.raw_keys = f("raw_keys", {T, dI});
  r.comp_tokens = random_ints<int32_t>({n}, seed, step + "comp_tokens", 0, T);
  r.comp_blocks = random_ints<int64_t>({n}, seed, step + "comp_blocks", 0, 100);
  r.comp_slots = random_ints<int64_t>({n}, seed, step + "comp_slots", 0, 32);
  r.comp_keys = f("comp_keys", {n, dI});
  r.block_ids = random_ints<int32_t>({T, KB}, seed, step + "block_ids", -1, 40);
  r.block_scores = f("block_scores", {T, KB});
  r.block_scores.at(0, KB - 1) = -INFINITY;  // past the valid prefix
  r.token_idx = random_ints<int32_t>({T, c.index_row_width()}, seed, step + "token_idx", -1, 200);
  r.q = f("q", {T, H, D});
  r.k = f("k", {T, G, D});
  r.v = f("v", {T, G, D});
  r.gate = f("gate", {T, H, D});
  r.attn = f("attn", {T, H, D});
  r.gated = f("gated", {T, H, D});
  r.out = f("out", {T, c.hidden_size});
  return r;
}

inline CacheSnapshot random_snapshot(const QsaConfig& c, uint64_t seed, Values values) {
  CacheSnapshot s;
  s.kv_slots = TensorI64({3});
  s.kv_slots.data = {0, 5, 17};
  s.kv_positions = TensorI64({3});
  s.kv_positions.data = {0, 5, 1};
  s.kv_k = random_floats({3, c.num_kv_heads, c.head_dim}, seed, "state.kv_k", values);
  s.kv_v = random_floats({3, c.num_kv_heads, c.head_dim}, seed, "state.kv_v", values);
  s.ring_slots = TensorI64({2});
  s.ring_slots.data = {1, 9};
  s.ring_positions = TensorI64({2});
  s.ring_positions.data = {1, 3};
  s.ring_rope = TensorI64({2, 3});
  s.ring_rope.data = {1, 1, 1, 3, 4, 5};
  s.ring_keys = random_floats({2, c.indexer_head_dim}, seed, "state.ring_keys", values);
  s.comp_slots = TensorI64({2});
  s.comp_slots.data = {0, 6};
  s.comp_blocks = TensorI64({2});
  s.comp_blocks.data = {0, 2};
  s.comp_keys = random_floats({2, c.indexer_head_dim}, seed, "state.comp_keys", values);
  return s;
}

inline TraceStep make_step(const QsaConfig& c, StepMetadata meta, const std::string& name, int64_t completed,
                           uint64_t seed, Values values) {
  TraceStep s;
  s.name = name;
  s.meta = std::move(meta);
  const int64_t T = s.meta.positions.shape.back();
  s.hidden = random_floats({T, c.hidden_size}, seed, name + ".hidden", values);
  s.recorded = random_outputs(c, T, completed, seed, name + ".", values);
  return s;
}

// Three steps: a prefill of 5 tokens ([T] positions, one completed group), an
// MTP decode with [1, T] positions and no completed group (zero-row comp_*
// outputs), and a two-request mixed step with mRoPE [3, T] positions, a
// padding row and every optional input (block_table_c, ring_blocks,
// slot_mapping).
inline Trace make_trace(uint64_t seed, Values values, QsaConfig config = variant_config()) {
  Trace t;
  t.producer = "trace_io_test";
  t.producer_version = "qsa test";
  t.seed = seed;
  t.description = "round trip: ünïcode too";
  t.config = config;
  t.geometry = CacheGeometry{8, 8};
  t.weights = random_weights(config, seed);
  if (values == Values::kFloat64)  // off the bf16 grid
    for (double& w : t.weights.q_proj.data) w *= 1.0 + 1.0 / 3.0;
  t.initial_state = random_snapshot(config, seed, values);

  t.steps.push_back(make_step(config, simple_step({0}, {5}, 2), "prefill", 1, seed, values));

  StepMetadata decode = simple_step({5}, {1}, 2);
  decode.positions.shape = {1, 1};
  decode.mtp_reuse = true;
  t.steps.push_back(make_step(config, decode, "decode", 0, seed, values));

  StepMetadata mixed = simple_step({6, 0}, {2, 3}, 2, 1);
  const int64_t T = mixed.positions.numel();
  TensorI64 mrope({3, T});
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t p = mixed.positions.at(i);
      mrope.at(a, i) = p < 0 ? -1 : p + a;
    }
  mixed.positions = mrope;
  mixed.block_table_c = mixed.block_table;
  mixed.block_table_c.at(1, 0) = 7;
  mixed.ring_blocks = {3, 4};
  mixed.slot_mapping = derive_step_layout(config, t.geometry, mixed).main_slot;
  t.steps.push_back(make_step(config, mixed, "mixed", 1, seed, values));
  return t;
}

// A fresh directory per test under gtest's temp dir, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            (std::string("qsa_") + info->test_suite_name() + "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

template <class T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
  return a.shape == b.shape && a.data.size() == b.data.size() &&
         (a.data.empty() || std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(T)) == 0);
}

}  // namespace qsa::testing_support
