// Stage tolerance formulas (the derivation is in stage_tolerances.hpp and
// docs/replay.md). Paths are built from the config so that a knob that adds
// a rounding (bf16 cos/sin, per-op RoPE, bf16 logits or P, bf16 sigmoid, an
// fp8 store) widens exactly the stages downstream of it.
#include "harness/compare/stage_tolerances.hpp"

#include <fmt/format.h>

#include <cmath>

#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"

namespace qsa {
namespace {

constexpr double kFp32Unit = 0x1p-24;   // fp32 unit roundoff
constexpr double kFp64Unit = 0x1p-53;   // fp64 unit roundoff
constexpr double kSameImplFactor = 64.0;
constexpr double kAccumFactor = 8.0;    // fp32 sums: c in c·2^-24·sqrt(n), element bound
constexpr double kAccumL2Factor = 4.0;  // the same for the global bound
constexpr double kL2Divisor = 8.0;      // rel_l2 = sqrt(sum u^2) / 8: see the header
// Tie bands (selection_tie_tolerance in the header says where each comes from).
constexpr double kTieBf16Engine = 1e-2;
constexpr double kTieFp32Engine = 1e-5;
constexpr double kTieSameImpl = 1e-12;

// Where a value is rounded: a storage point (bf16 under round_storage, an
// fp32 store otherwise), an fp8 store (always: the indexer/KV dtype), or a
// knob-driven bf16 rounding.
enum class PointKind { kStore, kFp8, kKnob };

struct Path {
  std::vector<std::pair<std::string, PointKind>> points;
  double n = 0.0;  // summed reduction length
  double m = 1.0;  // typical magnitude

  void add(const std::string& name, PointKind kind) { points.emplace_back(name, kind); }
  void append(const Path& other) {
    points.insert(points.end(), other.points.begin(), other.points.end());
    n += other.n;
  }
};

void add_rope_knobs(const QsaConfig& c, const std::string& what, Path& p) {
  if (c.precision.cos_sin == CosSinDtype::kBf16) p.add(what + " bf16 cos/sin", PointKind::kKnob);
  if (c.precision.rope_per_op_rounding) {
    p.add(what + " rope x*cos", PointKind::kKnob);
    p.add(what + " rope rot*sin", PointKind::kKnob);
  }
}

// proj -> norm -> rope over one head of `dim`, as for index_q, q and k.
Path normed_rotated(const QsaConfig& c, const std::string& what, int dim) {
  Path p;
  p.add(what + " proj", PointKind::kStore);
  p.add(what + " norm", PointKind::kStore);
  p.add(what + " rope", PointKind::kStore);
  add_rope_knobs(c, what, p);
  p.n = c.hidden_size + dim;
  return p;
}

Path index_q_path(const QsaConfig& c) {
  Path p = normed_rotated(c, "index_q", c.indexer_head_dim);
  if (c.indexer_dtype == IndexerDtype::kFp8) p.add("index_q fp8 store", PointKind::kFp8);
  return p;
}

Path comp_keys_path(const QsaConfig& c) {
  Path p;
  p.add("raw_key proj", PointKind::kStore);
  p.add("pool", PointKind::kStore);
  p.add("comp_key norm", PointKind::kStore);
  p.add("comp_key rope", PointKind::kStore);
  add_rope_knobs(c, "comp_key", p);
  if (c.indexer_dtype == IndexerDtype::kFp8) p.add("comp_key fp8 store", PointKind::kFp8);
  p.n = c.hidden_size + c.compress_ratio + c.indexer_head_dim;
  return p;
}

Path projection_path(const QsaConfig& c, const std::string& what) {
  Path p;
  p.add(what + " proj", PointKind::kStore);
  p.n = c.hidden_size;
  return p;
}

Path attn_path(const QsaConfig& c) {
  Path p = normed_rotated(c, "q", c.head_dim);
  Path k = normed_rotated(c, "k", c.head_dim);
  k.n = c.head_dim;  // hidden is counted once: both sums run over the same input
  p.append(k);
  p.add("v proj", PointKind::kStore);
  if (c.kv_dtype != KvDtype::kBf16) {
    p.add("K cache store", PointKind::kFp8);
    p.add("V cache store", PointKind::kFp8);
  }
  if (c.precision.round_logits_bf16) p.add("bf16 logits", PointKind::kKnob);
  if (c.precision.p_rounding != PRounding::kNone) p.add("bf16 P", PointKind::kKnob);
  p.add("attn out", PointKind::kStore);
  p.n += c.row_width();
  return p;
}

Path gated_path(const QsaConfig& c) {
  Path p = attn_path(c);
  p.add("gate proj", PointKind::kStore);
  if (c.precision.round_sigmoid_bf16) p.add("bf16 sigmoid", PointKind::kKnob);
  p.add("gated", PointKind::kStore);
  return p;
}

Path stage_path(const QsaConfig& c, const std::string& stage) {
  if (stage == "index_q") return index_q_path(c);
  if (stage == "raw_keys") return projection_path(c, "raw_key");
  if (stage == "comp_keys") return comp_keys_path(c);
  if (stage == "block_scores") {
    Path p = index_q_path(c);
    p.append(comp_keys_path(c));
    p.n += static_cast<double>(c.indexer_heads) * c.indexer_head_dim;
    p.m = c.index_score_scale() * c.indexer_heads * std::sqrt(static_cast<double>(c.indexer_head_dim));
    return p;
  }
  if (stage == "q") return normed_rotated(c, "q", c.head_dim);
  if (stage == "k") return normed_rotated(c, "k", c.head_dim);
  if (stage == "v") return projection_path(c, "v");
  if (stage == "gate") return projection_path(c, "gate");
  if (stage == "attn") return attn_path(c);
  if (stage == "gated") return gated_path(c);
  if (stage == "out") {
    Path p = gated_path(c);
    p.add("out", PointKind::kStore);
    p.n += static_cast<double>(c.num_heads) * c.head_dim;
    return p;
  }
  std::string known;
  for (const auto& s : tolerance_stage_names()) known += (known.empty() ? "" : ", ") + s;
  throw InputError("no tolerance for stage '" + stage + "' (known stages: " + known +
                   "; integer stages are compared exactly)");
}

double unit_of(PointKind kind, bool round_storage) {
  switch (kind) {
    case PointKind::kFp8: return kFp8Eps;
    case PointKind::kKnob: return kBf16Eps;
    case PointKind::kStore: break;
  }
  return round_storage ? kBf16Eps : kFp32Unit;
}

}  // namespace

std::string to_string(ToleranceContext ctx) {
  return ctx == ToleranceContext::kEngine ? "engine" : "same-implementation";
}

const std::vector<std::string>& tolerance_stage_names() {
  static const std::vector<std::string> kNames = {"index_q", "raw_keys", "comp_keys", "block_scores",
                                                  "q",       "k",        "v",         "gate",
                                                  "attn",    "gated",    "out"};
  return kNames;
}

Tolerance stage_tolerance(const QsaConfig& c, const std::string& stage, ToleranceContext ctx) {
  const Path p = stage_path(c, stage);
  const double sqrt_n = std::sqrt(p.n);
  Tolerance t;
  if (ctx == ToleranceContext::kSameImplementation) {
    t.rel = kSameImplFactor * kFp64Unit * sqrt_n;
    t.abs = t.rel * p.m;
    t.rel_l2 = t.rel;
    t.why = fmt::format("same implementation, {}: fp64 summation order only: rel = rel_l2 = 64*2^-53*sqrt(n={:g}) "
                        "= {:.3g}, abs = rel*m (m={:.3g}) = {:.3g}",
                        stage, p.n, t.rel, p.m, t.abs);
    return t;
  }
  const bool rs = c.precision.round_storage;
  double sum = 0.0;
  double sum_sq = 0.0;
  std::string names;
  for (const auto& [name, kind] : p.points) {
    const double u = unit_of(kind, rs);
    sum += u;
    sum_sq += u * u;
    names += (names.empty() ? "" : ", ") + name + (kind == PointKind::kFp8 ? " (fp8)" : "");
  }
  const double accum = kFp32Unit * sqrt_n;
  t.rel = sum + kAccumFactor * accum;
  t.abs = t.rel * p.m;
  t.rel_l2 = std::sqrt(sum_sq) / kL2Divisor + kAccumL2Factor * accum;
  t.why = fmt::format("engine ({} storage), {}: {} rounding point{} [{}], fp32 sums over n={:g}: "
                      "rel = sum(u_i) + 8*2^-24*sqrt(n) = {:.3g}, abs = rel*m (m={:.3g}) = {:.3g}, "
                      "rel_l2 = sqrt(sum(u_i^2))/8 + 4*2^-24*sqrt(n) = {:.3g}",
                      rs ? "bf16" : "fp32", stage, p.points.size(), p.points.size() == 1 ? "" : "s", names, p.n,
                      t.rel, p.m, t.abs, t.rel_l2);
  return t;
}

double selection_tie_tolerance(const QsaConfig& c, ToleranceContext ctx) {
  if (ctx == ToleranceContext::kSameImplementation) return kTieSameImpl;
  return c.precision.round_storage ? kTieBf16Engine : kTieFp32Engine;
}

}  // namespace qsa
