#include "reference/rope.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "reference/core/float_formats.hpp"

namespace qsa {
namespace {

void validate_rope_params(const RopeParams& p) {
  auto fail = [](const std::string& msg) { throw ConfigError("invalid rope params: " + msg); };
  if (p.heads <= 0 || p.head_dim <= 0)
    fail(fmt::format("heads = {} and head_dim = {} must be positive", p.heads, p.head_dim));
  if (p.rotary_dim <= 0 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim)
    fail(fmt::format("rotary_dim = {} must be positive, even and at most head_dim = {}",
                     p.rotary_dim, p.head_dim));
  if (!(p.theta > 0.0) || !std::isfinite(p.theta))
    fail(fmt::format("theta = {} must be positive and finite", p.theta));
  const auto& s = p.mrope_section;
  // All zeros is accepted as plain RoPE: every pair then takes axis t.
  const int sum = s[0] + s[1] + s[2];
  if (s[0] < 0 || s[1] < 0 || s[2] < 0 || (sum != 0 && sum != p.rotary_dim / 2))
    fail(
        fmt::format("mrope_section [{}, {}, {}] must be non-negative and sum to rotary_dim / 2 = "
                    "{} (or be all zero for plain RoPE)",
                    s[0], s[1], s[2], p.rotary_dim / 2));
}

void require_pair(const RopeParams& p, int pair) {
  if (pair < 0 || pair >= p.rotary_dim / 2)
    throw InputError(fmt::format("rope pair {} is out of range [0, {}) for rotary_dim = {}", pair,
                                 p.rotary_dim / 2, p.rotary_dim));
}

// The angle from a precomputed inv_freq, so apply_rope evaluates pow() once
// per pair rather than once per token.
double rope_angle(const RopeParams& p, double inv_freq, int64_t position) {
  if (p.angle == AngleMode::kExact) return static_cast<double>(position) * inv_freq;
  // torch: positions cast to fp32, then an fp32 product (the error that grows
  // with context length). inv_freq is fp32 (or bf16) here, so the cast is exact.
  return static_cast<double>(static_cast<float>(position) * static_cast<float>(inv_freq));
}

void cos_sin_of_angle(const RopeParams& p, double angle, double* c, double* s) {
  *c = std::cos(angle);
  *s = std::sin(angle);
  if (p.cos_sin == CosSinDtype::kExact) return;
  // A bf16 cos/sin cache is built in fp32 and then cast: two roundings.
  *c = round_fp32(*c);
  *s = round_fp32(*s);
  if (p.cos_sin == CosSinDtype::kBf16) {
    *c = round_bf16(*c);
    *s = round_bf16(*s);
  }
}

// One rotated pair. `rot` is rotate_half's value: -x[b] for the first member,
// +x[a] for the second, so per-op rounding matches hf-eager's
// round(round(x*cos) + round(rot*sin)).
double rotate_one(const RopeParams& p, double x, double rot, double c, double s) {
  if (p.per_op_rounding) return round_bf16(round_bf16(x * c) + round_bf16(rot * s));
  const double v = x * c + rot * s;
  return p.round_output ? round_bf16(v) : v;
}

void rotate_head(const RopeParams& p, const double* cos_pair, const double* sin_pair, double* x) {
  const int half = p.rotary_dim / 2;
  for (int j = 0; j < half; ++j) {
    const int a = p.style == RopeStyle::kNeox ? j : 2 * j;
    const int b = p.style == RopeStyle::kNeox ? j + half : 2 * j + 1;
    const double xa = x[a];
    const double xb = x[b];
    x[a] = rotate_one(p, xa, -xb, cos_pair[j], sin_pair[j]);
    x[b] = rotate_one(p, xb, xa, cos_pair[j], sin_pair[j]);
  }
}

void cos_sin_table(const RopeParams& p, const std::vector<double>& inv_freq, const int64_t pos3[3],
                   double* cos_pair, double* sin_pair) {
  for (int j = 0; j < p.rotary_dim / 2; ++j) {
    const int64_t pos = pos3[mrope_axis(p.mrope_section, j)];
    cos_sin_of_angle(p, rope_angle(p, inv_freq[j], pos), &cos_pair[j], &sin_pair[j]);
  }
}

std::vector<double> inv_freq_table(const RopeParams& p) {
  std::vector<double> inv(p.rotary_dim / 2);
  for (int j = 0; j < p.rotary_dim / 2; ++j) inv[j] = rope_inv_freq(p, j);
  return inv;
}

}  // namespace

int mrope_axis(const std::array<int, 3>& section, int pair) {
  if (pair < 0) throw InputError(fmt::format("mrope pair {} is negative", pair));
  if (pair % 3 == 1 && pair < 3 * section[1]) return 1;
  if (pair % 3 == 2 && pair < 3 * section[2]) return 2;
  return 0;
}

double rope_inv_freq(const RopeParams& p, int pair) {
  validate_rope_params(p);
  require_pair(p, pair);
  const double exponent = 2.0 * pair / p.rotary_dim;
  if (p.angle == AngleMode::kExact) return std::pow(p.theta, -exponent);
  // HF's fp32 inv_freq is bit-identical to f32(1 / f32(theta^(2j/R))).
  const float inv = 1.0f / static_cast<float>(std::pow(p.theta, exponent));
  if (p.angle == AngleMode::kFp32Bf16InvFreq) return round_bf16(inv);
  return inv;
}

void rope_cos_sin(const RopeParams& p, int64_t position, int pair, double* cos_out,
                  double* sin_out) {
  const double angle = rope_angle(p, rope_inv_freq(p, pair), position);
  cos_sin_of_angle(p, angle, cos_out, sin_out);
}

void rope_row(const RopeParams& p, const int64_t pos3[3], double* x) {
  validate_rope_params(p);
  const std::vector<double> inv = inv_freq_table(p);
  std::vector<double> c(p.rotary_dim / 2), s(p.rotary_dim / 2);
  cos_sin_table(p, inv, pos3, c.data(), s.data());
  rotate_head(p, c.data(), s.data(), x);
}

void apply_rope(const RopeParams& p, const TensorI64& rope_pos, TensorD& x) {
  validate_rope_params(p);
  if (x.rank() != 3)
    throw InputError(fmt::format("rope input x has shape {}, expected [tokens, {}, {}]",
                                 shape_to_string(x.shape), p.heads, p.head_dim));
  const int64_t tokens = x.dim(0);
  require_shape(x, {tokens, p.heads, p.head_dim}, "rope input x");
  require_shape(rope_pos, {3, tokens}, "rope positions rope_pos");

  const std::vector<double> inv = inv_freq_table(p);
  const int half = p.rotary_dim / 2;
#pragma omp parallel
  {
    std::vector<double> c(half), s(half);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t pos3[3] = {rope_pos.at(0, t), rope_pos.at(1, t), rope_pos.at(2, t)};
      if (pos3[0] < 0) continue;  // padding: engines skip it, so its values stay as given
      cos_sin_table(p, inv, pos3, c.data(), s.data());
      for (int h = 0; h < p.heads; ++h) rotate_head(p, c.data(), s.data(), &x.at(t, h, 0));
    }
  }
}

}  // namespace qsa
