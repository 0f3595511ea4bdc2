#include "reference/weights.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"

namespace qsa {

namespace {

struct WeightSpec {
  const char* name;
  TensorD LayerWeights::*field;
  Shape shape;
};

std::vector<WeightSpec> weight_specs(const QsaConfig& c) {
  const int64_t hid = c.hidden_size, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  const int64_t HI = c.indexer_heads, dI = c.indexer_head_dim;
  return {
      {"index_qk_proj", &LayerWeights::index_qk_proj, {(HI + 1) * dI, hid}},
      {"index_q_norm", &LayerWeights::index_q_norm, {dI}},
      {"index_k_norm", &LayerWeights::index_k_norm, {dI}},
      {"q_proj", &LayerWeights::q_proj, {H * 2 * D, hid}},
      {"k_proj", &LayerWeights::k_proj, {G * D, hid}},
      {"v_proj", &LayerWeights::v_proj, {G * D, hid}},
      {"q_norm", &LayerWeights::q_norm, {D}},
      {"k_norm", &LayerWeights::k_norm, {D}},
      {"o_proj", &LayerWeights::o_proj, {hid, H * D}},
  };
}

}  // namespace

void validate_weights(const QsaConfig& c, const LayerWeights& w) {
  for (const auto& spec : weight_specs(c)) {
    const TensorD& t = w.*spec.field;
    require_shape(t, spec.shape, std::string("weight ") + spec.name);
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data[i]))
        throw InputError(fmt::format("weight {} holds a non-finite value {} at flat index {}", spec.name,
                                     t.data[i], i));
  }
}

LayerWeights random_weights(const QsaConfig& c, uint64_t seed) {
  LayerWeights w;
  for (const auto& spec : weight_specs(c)) {
    TensorD t(spec.shape);
    const CounterRng rng(seed, std::string("weight.") + spec.name);
    const bool is_norm = spec.shape.size() == 1;
    // Norm gains near 1 (w near 0); matrices keep activations at unit scale.
    const double scale = is_norm ? 0.1 : 1.0 / std::sqrt(static_cast<double>(spec.shape[1]));
    for (int64_t i = 0; i < t.numel(); ++i) t.data[i] = round_bf16(scale * rng.normal(i));
    w.*spec.field = std::move(t);
  }
  return w;
}

}  // namespace qsa
