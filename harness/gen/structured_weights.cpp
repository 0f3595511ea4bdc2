#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/gen/generator.hpp"
#include "harness/gen/planted.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/weights.hpp"

namespace qsa {

namespace {

using gen::unit_vector;

// w[row0 + r, :] += scale · z[r] · u  for r in [0, z.size()).
void add_bridge(TensorD& w, int64_t row0, const std::vector<double>& z, const std::vector<double>& u, double scale) {
  const int64_t cols = w.dim(1);
  for (size_t r = 0; r < z.size(); ++r)
    for (int64_t j = 0; j < cols; ++j) w.at(row0 + static_cast<int64_t>(r), j) += scale * z[r] * u[j];
}

}  // namespace

LayerWeights structured_weights(const QsaConfig& c, const GenOptions& o) {
  LayerWeights w = random_weights(c, o.seed);
  const int hid = c.hidden_size, G = c.num_kv_heads, D = c.head_dim, R = c.rotary_dim;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim;
  const auto u_query = unit_vector(o.seed, gen::kQuery, hid);
  const auto u_sink = unit_vector(o.seed, gen::kSink, hid);
  const auto u_ask = unit_vector(o.seed, gen::kAsk, hid);
  const auto u_needle = unit_vector(o.seed, gen::kNeedle, hid);

  // Local attention: each KV head partly copies the Q rows of its group's
  // first head, so similar hidden states give positive logits.
  const double tie = std::clamp(o.qk_tie, 0.0, 1.0);
  for (int g = 0; g < G; ++g) {
    const int64_t q_row0 = int64_t{g} * c.gqa_group() * 2 * D;
    for (int r = 0; r < D; ++r)
      for (int j = 0; j < hid; ++j) {
        double& k = w.k_proj.at(int64_t{g} * D + r, j);
        k = std::sqrt(1 - tie * tie) * k + tie * w.q_proj.at(q_row0 + r, j);
      }
  }
  // Bridges: a per-group vector in the un-rotated dims links the query
  // direction to the sink direction and the ask direction to the needle one.
  // Scale sqrt(D) makes a unit planted amplitude comparable to a head's
  // random part.
  const double scale = std::sqrt(static_cast<double>(D));
  for (int g = 0; g < G; ++g) {
    const auto z_sink = unit_vector(o.seed, "gen.z.sink." + std::to_string(g), D, R);
    const auto z_needle = unit_vector(o.seed, "gen.z.needle." + std::to_string(g), D, R);
    add_bridge(w.k_proj, int64_t{g} * D, z_sink, u_sink, scale);
    add_bridge(w.k_proj, int64_t{g} * D, z_needle, u_needle, scale);
    for (int h = g * c.gqa_group(); h < (g + 1) * c.gqa_group(); ++h) {
      add_bridge(w.q_proj, int64_t{h} * 2 * D, z_sink, u_query, scale);
      add_bridge(w.q_proj, int64_t{h} * 2 * D, z_needle, u_ask, scale);
    }
  }
  // The indexer sees the same structure, scaled by the alignment knob.
  const double a = std::clamp(o.indexer_alignment, 0.0, 1.0) * std::sqrt(static_cast<double>(dI));
  if (a > 0) {
    const auto zi_sink = unit_vector(o.seed, "gen.zi.sink", dI, R);
    const auto zi_needle = unit_vector(o.seed, "gen.zi.needle", dI, R);
    for (int i = 0; i < HI; ++i) {
      add_bridge(w.index_qk_proj, int64_t{i} * dI, zi_sink, u_query, a);
      add_bridge(w.index_qk_proj, int64_t{i} * dI, zi_needle, u_ask, a);
    }
    add_bridge(w.index_qk_proj, int64_t{HI} * dI, zi_sink, u_sink, a);
    add_bridge(w.index_qk_proj, int64_t{HI} * dI, zi_needle, u_needle, a);
  }
  for (TensorD* t : {&w.index_qk_proj, &w.q_proj, &w.k_proj})
    for (double& x : t->data) x = round_bf16(x);
  return w;
}

}  // namespace qsa
