// GPU prepare (gpu/prepare) against the reference functions of the step
// driver's steps 2-5 (gemma_rms_norm, apply_rope, quantize_indexer,
// MainKvCache::write, compress_completed_groups over a RawKeyRing,
// write_ring), through persistent caches over a program of steps:
//   0. padding rows only (no request);
//   1. prefill of three requests, each leaving a group open, plus padding;
//   2. a mixed batch: request 0 continues with a chunk longer than the ring
//      (its ring writes wrap onto the members of the group straddling the
//      chunk boundary, which the pooling must read first), request 1
//      decodes, request 2 continues with a short chunk that also completes a
//      straddling group, plus padding;
//   3. decode of all three (request 1 completes a group from the ring).
// Every output element (index_q, q, k_out, gate; padding rows exactly 0) and
// every cache row the step touches (main K/V, compressed rows, ring keys and
// their RoPE positions) is compared; every other cache row must keep its
// bytes. Outputs are poisoned before each launch, caches once at the start.
// Tolerances: tests/tolerances.hpp (GPU prepare); the per-element bound
// follows each value through norm, RoPE and the stores, with the reference's
// own intermediate values (a model the test checks against the reference's
// outputs, bit for bit, before using it).
// Cases: tiny, qwen4-exp and the widest dims the kernel takes; r 1, 4, 8,
// 64; engine, hf-eager, exact and custom angle / cos-sin knobs; bf16 and fp8
// (e4m3fn, e4m3fnuz) indexer and KV; text and 3-row mRoPE positions (large t
// positions); NeoX and GPT-J; paired and element-by-element memory access.
// Also: the storage encoders against the reference codecs (on the host and,
// for bf16, as the kernel runs them on the device), validator and launcher
// rejections.
#include "gpu/prepare/prepare.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/common/device_buffer.hpp"
#include "gpu/common/poison.hpp"
#include "gpu/prepare/prepare_codes.hpp"
#include "reference/compress.hpp"
#include "reference/core/config.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/kv_cache.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rope.hpp"
#include "reference/side_caches.hpp"
#include "tests/test_support.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

using gpu::DeviceBuffer;

// ---- cases ------------------------------------------------------------------

enum class Knobs { kEngine, kHfEager, kExact, kExactAngles, kBf16InvFreq };

struct Case {
  bool qwen;  // qwen4-exp dims, else tiny
  int ratio;
  Knobs knobs;
  IndexerDtype idx;
  KvDtype kv;
  Fp8Flavor flavor;  // of both fp8 stores
  bool mrope;
  RopeStyle style;
  // Inputs whose fp32 norm is exact (every head row +-2^k, eps 0; raw keys
  // equal within a group): then every output must equal the reference's
  // rounded to the output dtype, bit for bit.
  bool exact_norm = false;
  // tiny with the widest heads the kernel takes (D 512, d_I 136: tail slots
  // partly filled) and 64 RoPE pairs (two pair slots per lane).
  bool wide = false;
  // gate 2 bytes off a 4-byte boundary (and index_qk 4 bytes off an 8-byte
  // one): the kernel stores element by element instead of in bf16 pairs
  // (KernelArgs::vec2).
  bool unaligned = false;
  // qwen4-exp dims with 64 RoPE pairs: two pair slots with the model's tail
  // slots (the kernel built for Shape<2, 6, false>; the model's own dims run
  // the exact Shape<1, 6, true>).
  bool rot128 = false;
};

std::string knobs_name(Knobs k) {
  switch (k) {
    case Knobs::kEngine: return "engine";
    case Knobs::kHfEager: return "hfeager";
    case Knobs::kExact: return "exact";
    case Knobs::kExactAngles: return "exactangles";
    case Knobs::kBf16InvFreq: return "bf16invfreq";
  }
  return "?";
}

std::string case_name(const Case& k) {
  const std::string f8 = k.flavor == Fp8Flavor::kE4m3fnuz ? "fp8fnuz" : "fp8fn";
  return std::string(k.qwen ? "qwen" : "tiny") + "_r" + std::to_string(k.ratio) + "_" + knobs_name(k.knobs) + "_idx" +
         (k.idx == IndexerDtype::kFp8 ? f8 : "bf16") + "_kv" + (k.kv == KvDtype::kFp8 ? f8 : "bf16") +
         (k.mrope ? "_mrope" : "_text") + (k.style == RopeStyle::kGptj ? "_gptj" : "") +
         (k.exact_norm ? "_exactnorm" : "") + (k.wide ? "_wide" : "") + (k.unaligned ? "_unaligned" : "") +
         (k.rot128 ? "_rot128" : "");
}
void PrintTo(const Case& k, std::ostream* os) { *os << case_name(k); }

// Seeds are fixed per case and overridable with QSA_TEST_SEED.
uint64_t case_seed(const std::string& name) {
  uint64_t base = 0x9e9a4e5ULL;
  if (const char* env = std::getenv("QSA_TEST_SEED")) base = std::strtoull(env, nullptr, 0);
  return base ^ stream_id(name);
}

QsaConfig case_config(const Case& k) {
  QsaConfig c = config_preset(k.qwen ? "qwen4-exp" : "tiny");
  c.compress_ratio = k.ratio;
  c.budget = 4 * k.ratio;
  c.page_size = 64;  // a multiple of 16 every tested r divides
  if (k.wide) {
    c.head_dim = gpu::kPrepareMaxHeadDim;
    c.indexer_head_dim = 136;
  }
  if (k.wide || k.rot128) {
    c.rotary_dim = 2 * gpu::kPrepareMaxRopePairs;
    c.mrope_section = {22, 21, 21};
  }
  switch (k.knobs) {
    case Knobs::kEngine: apply_profile(c, PrecisionProfile::kEngine); break;
    case Knobs::kHfEager: apply_profile(c, PrecisionProfile::kHfEager); break;
    case Knobs::kExact: apply_profile(c, PrecisionProfile::kExact); break;
    case Knobs::kExactAngles:
      apply_profile(c, PrecisionProfile::kCustom);
      c.precision = knobs_for_profile(PrecisionProfile::kEngine);
      c.precision.angle = AngleMode::kExact;
      c.precision.cos_sin = CosSinDtype::kFp32;
      break;
    case Knobs::kBf16InvFreq:
      apply_profile(c, PrecisionProfile::kCustom);
      c.precision = knobs_for_profile(PrecisionProfile::kEngine);
      c.precision.angle = AngleMode::kFp32Bf16InvFreq;
      c.precision.cos_sin = CosSinDtype::kExact;
      break;
  }
  c.indexer_dtype = k.idx;
  c.kv_dtype = k.kv;
  c.fp8_flavor = k.flavor;
  c.k_scale = 0.37;  // not a power of two: the division by it rounds
  c.v_scale = 0.25;
  c.rope_style = k.style;
  validate_config(c);
  return c;
}

// The (t, h, w) RoPE positions of token p of request `req` in mRoPE cases:
// t far out (long-context angles), h and w apart from it.
int64_t rope_axis(int axis, int req, int64_t p) {
  if (axis == 0) return 262000 + 1000 * req + p;
  return axis == 1 ? p / 3 + req : 2 * p + 1;
}

// ---- the per-element model of the reference's chain -----------------------

// One head through norm, RoPE and the final store: the reference's values
// and the bound on |GPU - reference| (tests/tolerances.hpp, GPU prepare).
struct HeadExpect {
  std::vector<double> pre, pre_tol;  // after RoPE (before the store)
  std::vector<double> value, tol;    // after the store
};

enum class Store { kBf16, kIndexer };

HeadExpect expect_head(const QsaConfig& c, const RmsNormParams& np, const RopeParams& rp, const double* x,
                       const double* w, const int64_t pos3[3], Store store) {
  const int n = np.dim;
  const double ub = tol::kGpuPrepareBf16Unit;
  std::vector<double> normed(static_cast<size_t>(n));
  gemma_rms_norm_row(np, x, w, normed.data());
  std::vector<double> dn(normed.size());
  for (int i = 0; i < n; ++i) {
    const double a = std::fabs(normed[i]);
    const double d = tol::gpu_prepare_norm_rel(n) * a;
    dn[i] = np.round_output ? tol::gpu_prepare_rounded_both(d * (1.0 + kBf16Eps), a, ub, 0.0) : d;
  }
  HeadExpect e;
  e.pre = normed;
  rope_row(rp, pos3, e.pre.data());
  e.pre_tol = dn;
  const int half = rp.rotary_dim / 2;
  const bool neox = rp.style == RopeStyle::kNeox;
  for (int i = 0; i < rp.rotary_dim; ++i) {
    const bool first = neox ? i < half : i % 2 == 0;
    const int pair = neox ? (first ? i : i - half) : i / 2;
    const int partner = neox ? (first ? i + half : i - half) : (first ? i + 1 : i - 1);
    double cs = 0.0, sn = 0.0;
    rope_cos_sin(rp, pos3[mrope_axis(rp.mrope_section, pair)], pair, &cs, &sn);
    const double xa = normed[i], xb = normed[partner];
    const double rot = first ? -xb : xb;
    const double da = std::fabs(cs) * dn[i] + tol::kGpuPrepareCosSinAbs * std::fabs(xa);
    const double db = std::fabs(sn) * dn[partner] + tol::kGpuPrepareCosSinAbs * std::fabs(xb);
    if (rp.per_op_rounding) {
      const double p1 = round_bf16(xa * cs), p2 = round_bf16(rot * sn);
      const double d1 = tol::gpu_prepare_rounded_both(da, std::fabs(p1), ub, 0.0);
      const double d2 = tol::gpu_prepare_rounded_both(db, std::fabs(p2), ub, 0.0);
      e.pre_tol[i] = tol::gpu_prepare_rounded_both(d1 + d2, std::fabs(e.pre[i]), ub, 0.0);
    } else if (rp.round_output) {
      e.pre_tol[i] = tol::gpu_prepare_rounded_both(da + db, std::fabs(e.pre[i]), ub, 0.0);
    } else {
      e.pre_tol[i] = da + db;
    }
  }
  // The GPU keeps unrounded values in fp64 until the store, which rounds
  // them to the output dtype once; the reference rounds where its knobs say.
  const bool ref_bf16 = rp.per_op_rounding || rp.round_output;
  const CompressParams cp = make_compress_params(c);
  const bool fp8 = store == Store::kIndexer && cp.dtype == IndexerDtype::kFp8;
  e.value.resize(normed.size());
  e.tol.resize(normed.size());
  for (int i = 0; i < n; ++i) {
    const double v = e.pre[i];
    e.value[i] = store == Store::kIndexer ? quantize_indexer(cp, v) : v;
    const bool rounded = i < rp.rotary_dim ? ref_bf16 : np.round_output;
    if (fp8) {
      e.tol[i] = tol::gpu_prepare_rounded_both(e.pre_tol[i], std::fabs(e.value[i]), tol::kGpuPrepareFp8Unit,
                                              tol::kGpuPrepareFp8Floor);
    } else if (rounded) {
      e.tol[i] = e.pre_tol[i];  // both sides hold bf16 values already: the bf16 store changes neither
    } else if (store == Store::kIndexer && cp.round_storage) {
      e.tol[i] = tol::gpu_prepare_rounded_both(e.pre_tol[i], std::fabs(e.value[i]), ub, 0.0);
    } else {
      e.tol[i] = tol::gpu_prepare_rounded_gpu_only(e.pre_tol[i], std::fabs(e.value[i]), ub);
    }
  }
  return e;
}

// ---- comparison -------------------------------------------------------------

// Counts mismatches of one step and reports the first few with coordinates.
class Checker {
 public:
  explicit Checker(std::string context) : context_(std::move(context)) {}
  ~Checker() {
    if (failures_ > 0) ADD_FAILURE() << context_ << ": " << failures_ << " mismatches in all";
  }
  void fail(const std::string& what) {
    if (failures_++ < 12) ADD_FAILURE() << context_ << ": " << what;
  }
  void close(const std::string& where, double got, double want, double tol) {
    if (std::isnan(got) || !(std::fabs(got - want) <= tol))
      fail(where + ": gpu " + num(got) + ", reference " + num(want) + ", |diff| " + num(std::fabs(got - want)) +
           " > tol " + num(tol));
  }
  void equal(const std::string& where, int64_t got, int64_t want) {
    if (got != want) fail(where + ": gpu " + std::to_string(got) + ", expected " + std::to_string(want));
  }
  // Values both sides store in the same format differ only by a flip at a
  // rounding tie; their number per tensor is bounded (gpu_prepare_flip_budget).
  void count_flip(const std::string& tensor, int dim, bool differs) {
    Flips& f = flips_[tensor];
    ++f.n;
    f.differ += differs ? 1 : 0;
    f.dim = dim;
  }
  void check_flips() {
    for (const auto& [tensor, f] : flips_) {
      const double budget = tol::gpu_prepare_flip_budget(static_cast<double>(f.n), f.dim);
      if (static_cast<double>(f.differ) > budget)
        fail(tensor + ": " + std::to_string(f.differ) + " of " + std::to_string(f.n) +
             " stored values differ from the reference, more than the flip budget " + num(budget));
    }
  }
  int failures() const { return failures_; }

 private:
  static std::string num(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
  struct Flips {
    int64_t n = 0, differ = 0;
    int dim = 0;
  };
  std::string context_;
  int failures_ = 0;
  std::map<std::string, Flips> flips_;
};

std::string at(const char* tensor, int64_t a, int64_t b, int64_t c) {
  return std::string(tensor) + "[" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) + "]";
}

uint16_t load_u16(const std::vector<uint8_t>& bytes, int64_t i) {
  return static_cast<uint16_t>(bytes[static_cast<size_t>(2 * i)] | (bytes[static_cast<size_t>(2 * i + 1)] << 8));
}

// ---- a session: config, reference state, device state -----------------------

constexpr int kReqs = 3;

class Session {
 public:
  Session(const Case& k, uint64_t seed)
      : k_(k),
        seed_(seed),
        c_(case_config(k)),
        eps_(k.exact_norm ? 0.0 : c_.rms_norm_eps),
        C_(c_.ring_capacity()),
        pages_per_req_(pages_needed(c_) + 1),
        geo_{int64_t{kReqs} * pages_per_req_, int64_t{kReqs} * pages_per_req_},
        pp_(gpu::make_prepare_params(c_, geo_.num_pages)),
        kv_(make_kv_cache_params(c_, geo_.num_pages)),
        ring_(geo_.num_ring_blocks, C_, c_.indexer_head_dim),
        comp_(geo_.num_pages, c_.compressed_rows_per_page(), c_.indexer_head_dim),
        ring_tags_(static_cast<size_t>(geo_.num_ring_blocks * C_), -1) {
    const int dI = c_.indexer_head_dim, D = c_.head_dim;
    for (RmsNormParams* n : {&pp_.norm_index_q, &pp_.norm_index_k, &pp_.norm_q, &pp_.norm_k}) n->eps = eps_;
    w_iq_ = weight(dI, "w_iq");
    w_ik_ = weight(dI, "w_ik");
    w_q_ = weight(D, "w_q");
    w_k_ = weight(D, "w_k");
    d_w_iq_ = DeviceBuffer<float>(floats(w_iq_));
    d_w_ik_ = DeviceBuffer<float>(floats(w_ik_));
    d_w_q_ = DeviceBuffer<float>(floats(w_q_));
    d_w_k_ = DeviceBuffer<float>(floats(w_k_));
    const size_t kv_values = static_cast<size_t>(kv_.num_slots()) * c_.num_kv_heads * D;
    d_k_cache_ = DeviceBuffer<uint8_t>(kv_values * kv_bytes());
    d_v_cache_ = DeviceBuffer<uint8_t>(kv_values * kv_bytes());
    d_comp_ = DeviceBuffer<uint8_t>(static_cast<size_t>(comp_.num_rows()) * dI * idx_bytes());
    d_ring_keys_ = DeviceBuffer<float>(ring_tags_.size() * dI);
    d_ring_rope_ = DeviceBuffer<int64_t>(ring_tags_.size() * 3);
    d_k_cache_.poison(gpu::kPoisonBf16Pair);
    d_v_cache_.poison(gpu::kPoisonBf16Pair);
    d_comp_.poison(gpu::kPoisonBf16Pair);
    d_ring_keys_.poison(gpu::kPoisonFloat);
    d_ring_rope_.poison(gpu::kPoisonId);
  }

  const QsaConfig& config() const { return c_; }
  int ratio() const { return c_.compress_ratio; }
  int capacity() const { return C_; }
  int32_t pages_per_req() const { return pages_per_req_; }

  // Metadata of a step over requests 0..R-1 with these chunk lengths.
  StepMetadata step(const std::vector<int32_t>& chunks, int64_t padding) {
    std::vector<int32_t> ctx(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) ctx[i] = lens_[i];
    StepMetadata m = simple_step(ctx, chunks, pages_per_req_, padding);
    if (k_.mrope) {
      const int64_t T = m.positions.numel();
      TensorI64 rows({3, T}, -1);
      for (size_t i = 0; i < chunks.size(); ++i)
        for (int32_t o = 0; o < chunks[i]; ++o)
          for (int a = 0; a < 3; ++a)
            rows.at(a, m.query_start_loc[i] + o) = rope_axis(a, static_cast<int>(i), int64_t{ctx[i]} + o);
      m.positions = rows;
    }
    for (size_t i = 0; i < chunks.size(); ++i) lens_[i] += chunks[i];
    return m;
  }

  // Runs one step on both sides and compares everything it produced.
  void run(const StepMetadata& m, int step_index);

 private:
  static int32_t pages_needed(const QsaConfig& c) {
    const int r = c.compress_ratio, C = c.ring_capacity();
    const int64_t longest = std::max<int64_t>({(r + 2) + (C + 2 * r + 3) + 1, 3 * r, r + 5});
    return static_cast<int32_t>((longest + c.page_size - 1) / c.page_size);
  }
  TensorD weight(int n, const char* name) const {
    TensorD w({n});
    const CounterRng rng(seed_, name);
    for (int64_t i = 0; i < n; ++i) w.data[static_cast<size_t>(i)] = round_bf16(0.1 * rng.normal(static_cast<uint64_t>(i)));
    return w;
  }
  static std::vector<float> floats(const TensorD& t) {
    std::vector<float> out(t.data.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data[i]);
    return out;
  }
  RmsNormParams norm_params(int64_t rows, int dim) const {
    RmsNormParams n = make_rms_norm_params(c_, rows, dim);
    n.eps = eps_;
    return n;
  }
  // Projection outputs [T, width] of the step: bf16 values, padding rows
  // included (garbage the kernel must ignore).
  struct Inputs {
    TensorD idx, qg, k, v;
  };
  Inputs make_inputs(const StepLayout& l, uint64_t seed) const;
  // A reference value as the GPU stores it: in bf16, in the indexer dtype,
  // or unchanged (fp8 KV values are stored values already).
  enum class Fmt { kBf16, kIndexer, kAsIs };
  double stored(double x, Fmt f) const {
    if (f == Fmt::kAsIs) return x;
    if (f == Fmt::kIndexer && c_.indexer_dtype == IndexerDtype::kFp8) return round_fp8(x, c_.fp8_flavor);
    return round_bf16(x);
  }
  // GPU value `got` against reference value `want` (tolerance `tol`).
  void compare(Checker& check, const char* tensor, int dim, const std::string& where, double got, double want,
               double tol, Fmt f) const {
    const double want_stored = stored(want, f);
    if (k_.exact_norm) return check.close(where, got, want_stored, 0.0);
    check.close(where, got, want, tol);
    if (want_stored == want) check.count_flip(tensor, dim, got != want);
  }
  size_t kv_bytes() const { return c_.kv_dtype == KvDtype::kFp8 ? 1 : 2; }
  size_t idx_bytes() const { return c_.indexer_dtype == IndexerDtype::kFp8 ? 1 : 2; }
  double decode_idx(const std::vector<uint8_t>& bytes, int64_t i) const {
    if (c_.indexer_dtype == IndexerDtype::kFp8) return fp8_decode(bytes[static_cast<size_t>(i)], c_.fp8_flavor);
    return bf16_value(load_u16(bytes, i));
  }
  double decode_kv(const std::vector<uint8_t>& bytes, int64_t i, double scale) const {
    if (c_.kv_dtype == KvDtype::kFp8) return fp8_decode(bytes[static_cast<size_t>(i)], c_.fp8_flavor) * scale;
    return bf16_value(load_u16(bytes, i));
  }

  Case k_;
  uint64_t seed_;
  QsaConfig c_;
  double eps_;  // of every norm, on both sides
  int C_;
  int32_t pages_per_req_;
  CacheGeometry geo_;
  gpu::PrepareParams pp_;
  MainKvCache kv_;
  RawKeyRing ring_;
  CompressedCache comp_;
  std::vector<int64_t> ring_tags_;
  int32_t lens_[kReqs] = {0, 0, 0};
  TensorD w_iq_, w_ik_, w_q_, w_k_;
  DeviceBuffer<float> d_w_iq_, d_w_ik_, d_w_q_, d_w_k_;
  DeviceBuffer<uint8_t> d_k_cache_, d_v_cache_, d_comp_;
  DeviceBuffer<float> d_ring_keys_;
  DeviceBuffer<int64_t> d_ring_rope_;
};

// Copies heads [col0 + h * stride, + dim) of a [T, width] matrix into [T, heads, dim].
TensorD take_heads(const TensorD& m, int64_t col0, int heads, int dim, int stride) {
  const int64_t T = m.dim(0);
  TensorD out({T, heads, dim});
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) std::copy_n(m.row(t) + col0 + int64_t{h} * stride, dim, &out.at(t, h, 0));
  return out;
}

void zero_rows_from(int64_t first, TensorD& x) {
  const int64_t w = x.numel() / x.dim(0);
  for (int64_t t = first; t < x.dim(0); ++t) std::fill_n(x.row(t), w, 0.0);
}

TensorD random_bf16(const Shape& shape, uint64_t seed, const std::string& name) {
  TensorD x = test::random_normal(shape, seed, name);
  for (double& v : x.data) v = round_bf16(v);
  return x;
}

// +-2^k with k in [-2, 2] per (key, row) and a sign per element, from `bits`.
void fill_power_row(const CounterRng& rng, uint64_t key, int n, double* out) {
  const int k = static_cast<int>(rng.bits(key * 1000003) % 5) - 2;
  for (int i = 0; i < n; ++i)
    out[i] = std::ldexp((rng.bits(key * 1000003 + 1 + static_cast<uint64_t>(i)) & 1) ? 1.0 : -1.0, k);
}

Session::Inputs Session::make_inputs(const StepLayout& l, uint64_t seed) const {
  const int64_t T = l.num_tokens;
  const int HI = c_.indexer_heads, dI = c_.indexer_head_dim, H = c_.num_heads, G = c_.num_kv_heads, D = c_.head_dim;
  Inputs in{random_bf16({T, (HI + 1) * dI}, seed, "prep.index_qk"), random_bf16({T, 2 * H * D}, seed, "prep.qg"),
            random_bf16({T, G * D}, seed, "prep.k"), random_bf16({T, G * D}, seed, "prep.v")};
  if (!k_.exact_norm) return in;
  const CounterRng rows(seed, "prep.power_rows"), keys(seed_, "prep.power_keys");
  for (int64_t t = 0; t < l.num_valid_tokens; ++t) {
    const auto key = [&](int64_t j) { return static_cast<uint64_t>(t * 64 + j); };
    for (int h = 0; h < HI; ++h) fill_power_row(rows, key(h), dI, in.idx.row(t) + int64_t{h} * dI);
    for (int h = 0; h < H; ++h) fill_power_row(rows, key(HI + h), D, in.qg.row(t) + int64_t{h} * 2 * D);
    for (int g = 0; g < G; ++g) fill_power_row(rows, key(HI + H + g), D, in.k.row(t) + int64_t{g} * D);
    // Raw keys depend on (request, group) only, so every pooled mean is a
    // member and its norm is exact too, across steps.
    const uint64_t group = static_cast<uint64_t>(l.token_to_req[t]) * 1000000 + static_cast<uint64_t>(l.pos[t] / c_.compress_ratio);
    fill_power_row(keys, group, dI, in.idx.row(t) + int64_t{HI} * dI);
  }
  return in;
}

void Session::run(const StepMetadata& m, int step_index) {
  const QsaConfig& c = c_;
  const StepLayout l = derive_step_layout(c, geo_, m);
  const int64_t T = l.num_tokens, valid = l.num_valid_tokens;
  const int HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  Checker check(case_name(k_) + " step " + std::to_string(step_index) + " (seed " + std::to_string(seed_) + ")");
  const uint64_t seed = seed_ ^ (0x100000001ULL * static_cast<uint64_t>(step_index + 1));

  const Inputs in = make_inputs(l, seed);
  const TensorD &idx = in.idx, &qg = in.qg, &kp = in.k, &vp = in.v;

  // ---- reference (reference/step_driver.cpp, steps 2-5) ----
  TensorD r_iq = take_heads(idx, 0, HI, dI, dI), r_raw({T, dI});
  TensorD r_q = take_heads(qg, 0, H, D, 2 * D), r_gate = take_heads(qg, D, H, D, 2 * D);
  TensorD r_k = take_heads(kp, 0, G, D, D), r_v = take_heads(vp, 0, G, D, D);
  for (int64_t t = 0; t < T; ++t) std::copy_n(idx.row(t) + int64_t{HI} * dI, dI, r_raw.row(t));
  for (TensorD* x : {&r_iq, &r_raw, &r_q, &r_gate, &r_k, &r_v}) zero_rows_from(valid, *x);
  const TensorD in_iq = r_iq, in_q = r_q, in_k = r_k;
  const CompressParams cp = make_compress_params(c);
  gemma_rms_norm(norm_params(T * HI, dI), r_iq, w_iq_, r_iq);
  apply_rope(make_rope_params(c, HI, dI), l.rope_pos, r_iq);
  for (double& x : r_iq.data) x = quantize_indexer(cp, x);
  gemma_rms_norm(norm_params(T * H, D), r_q, w_q_, r_q);
  apply_rope(make_rope_params(c, H, D), l.rope_pos, r_q);
  gemma_rms_norm(norm_params(T * G, D), r_k, w_k_, r_k);
  apply_rope(make_rope_params(c, G, D), l.rope_pos, r_k);
  for (int64_t t = 0; t < valid; ++t) kv_.write(l.main_slot[t], l.pos[t], r_k.row(t), r_v.row(t));

  const RmsNormParams nk = norm_params(1, dI);
  const RopeParams rk = make_rope_params(c, 1, dI);
  const CompressedRows rows = compress_completed_groups(cp, nk, rk, w_ik_, l, r_raw, ring_, comp_);
  // The model of each pooled row, from the ring as it stands before write_ring.
  std::vector<HeadExpect> comp_expect;
  for (size_t i = 0; i < rows.slot.size(); ++i) {
    const int64_t t = rows.token[i];
    const int req = l.token_to_req[t];
    const int64_t ctx = l.context_len(req), first = rows.block[i] * cp.ratio;
    std::vector<double> pooled(static_cast<size_t>(dI), 0.0);
    int64_t rope3[3] = {0, 0, 0};
    for (int mbr = 0; mbr < cp.ratio; ++mbr) {
      const int64_t q = first + mbr;
      int64_t member_rope[3];
      const double* key;
      if (q >= ctx) {
        const int64_t row = l.row_begin(req) + (q - ctx);
        key = r_raw.row(row);
        for (int a = 0; a < 3; ++a) member_rope[a] = l.rope_pos.at(a, row);
      } else {
        key = ring_.read(l.ring_blocks[req], q, member_rope);
      }
      if (mbr == 0) std::copy_n(member_rope, 3, rope3);
      for (int d = 0; d < dI; ++d) pooled[d] += key[d];
    }
    for (double& x : pooled) x = cp.round_storage ? round_bf16(x / cp.ratio) : x / cp.ratio;
    comp_expect.push_back(expect_head(c, nk, rk, pooled.data(), w_ik_.ptr(), rope3, Store::kIndexer));
    for (int d = 0; d < dI; ++d)
      if (comp_expect.back().value[d] != rows.keys.at(static_cast<int64_t>(i), d))
        check.fail("test model of compressed row " + std::to_string(rows.slot[i]) + " disagrees with the reference");
  }
  // Steps 1 and 2 attack the race: some ring slot this step writes holds a
  // member of a straddling group the step pools.
  std::set<int64_t> ring_written;
  for (int64_t t = 0; t < T; ++t)
    if (l.ring_slot[t] >= 0) ring_written.insert(l.ring_slot[t]);
  bool clobbers = false;
  for (size_t i = 0; i < rows.slot.size(); ++i) {
    const int req = l.token_to_req[rows.token[i]];
    for (int64_t q = rows.block[i] * cp.ratio; q < l.context_len(req); ++q)
      clobbers |= ring_written.count(int64_t{l.ring_blocks[req]} * C_ + q % C_) > 0;
  }
  if (step_index == 2 && ratio() > 1) {
    EXPECT_TRUE(clobbers) << "step 2 no longer attacks the ring race";
  }
  write_ring(l, r_raw, ring_);

  // ---- GPU ----
  ASSERT_NO_THROW(gpu::validate_prepare(pp_, l, ring_tags_));
  std::vector<float> idx_host = floats(idx);
  if (k_.unaligned) idx_host.insert(idx_host.begin(), 0.0f);  // then passed from its second element
  DeviceBuffer<float> d_idx(idx_host), d_qg(floats(qg)), d_k(floats(kp)), d_v(floats(vp));
  DeviceBuffer<int32_t> d_t2r(l.token_to_req), d_starts(l.starts), d_ring_blocks(l.ring_blocks);
  DeviceBuffer<int64_t> d_pos(l.pos), d_rope(l.rope_pos.data), d_main(l.main_slot), d_ring_slot(l.ring_slot),
      d_comp_slot(l.compressed_slot);
  DeviceBuffer<uint8_t> d_index_q(static_cast<size_t>(T) * HI * dI * idx_bytes());
  DeviceBuffer<uint16_t> d_q(static_cast<size_t>(T) * H * D), d_kout(static_cast<size_t>(T) * G * D),
      d_gate(static_cast<size_t>(T) * H * D + (k_.unaligned ? 1 : 0));  // then passed from its second element
  for (auto* b : {&d_q, &d_kout, &d_gate}) b->poison(gpu::kPoisonBf16Pair);
  d_index_q.poison(gpu::kPoisonBf16Pair);
  const std::vector<uint8_t> k_before = d_k_cache_.download(), v_before = d_v_cache_.download(),
                             comp_before = d_comp_.download();
  const std::vector<float> ring_before = d_ring_keys_.download();
  const std::vector<int64_t> rope_before = d_ring_rope_.download();

  gpu::PrepareArgs a;
  a.index_qk = d_idx.get() + (k_.unaligned ? 1 : 0);
  a.qg = d_qg.get();
  a.k = d_k.get();
  a.v = d_v.get();
  a.index_q_norm_w = d_w_iq_.get();
  a.index_k_norm_w = d_w_ik_.get();
  a.q_norm_w = d_w_q_.get();
  a.k_norm_w = d_w_k_.get();
  a.token_to_req = d_t2r.get();
  a.pos = d_pos.get();
  a.rope_pos = d_rope.get();
  a.main_slot = d_main.get();
  a.ring_slot = d_ring_slot.get();
  a.compressed_slot = d_comp_slot.get();
  a.starts = d_starts.get();
  a.ring_blocks = d_ring_blocks.get();
  a.ring_keys = d_ring_keys_.get();
  a.ring_rope = d_ring_rope_.get();
  a.compressed = d_comp_.get();
  a.k_cache = d_k_cache_.get();
  a.v_cache = d_v_cache_.get();
  a.index_q = d_index_q.get();
  a.q = d_q.get();
  a.k_out = d_kout.get();
  a.gate = d_gate.get() + (k_.unaligned ? 1 : 0);
  const gpu::PrepareLayout pl{T, l.num_reqs, static_cast<int64_t>(ring_tags_.size()), comp_.num_rows(),
                              kv_.num_slots()};
  gpu::launch_prepare(pp_, pl, a, hipStream_t{});
  QSA_GPU_CHECK(hipDeviceSynchronize());
  const std::vector<uint8_t> g_iq = d_index_q.download();
  const std::vector<uint16_t> g_q = d_q.download(), g_k = d_kout.download();
  std::vector<uint16_t> g_gate = d_gate.download();
  if (k_.unaligned) g_gate.erase(g_gate.begin());
  const std::vector<uint8_t> k_after = d_k_cache_.download(), v_after = d_v_cache_.download(),
                             comp_after = d_comp_.download();
  const std::vector<float> ring_after = d_ring_keys_.download();
  const std::vector<int64_t> rope_after = d_ring_rope_.download();

  // ---- per-row outputs ----
  const RmsNormParams n_iq = norm_params(1, dI), n_m = norm_params(1, D);
  const RopeParams rp_i = make_rope_params(c, 1, dI), rp_m = make_rope_params(c, 1, D);
  for (int64_t t = 0; t < T; ++t) {
    const bool real = t < valid;
    const int64_t pos3[3] = {l.rope_pos.at(0, t), l.rope_pos.at(1, t), l.rope_pos.at(2, t)};
    for (int h = 0; h < HI; ++h) {
      HeadExpect e;
      if (real) e = expect_head(c, n_iq, rp_i, &in_iq.at(t, h, 0), w_iq_.ptr(), pos3, Store::kIndexer);
      for (int d = 0; d < dI; ++d) {
        const int64_t i = (t * HI + h) * dI + d;
        if (!real) {
          check.close(at("index_q", t, h, d), decode_idx(g_iq, i), 0.0, 0.0);
          continue;
        }
        if (e.value[d] != r_iq.at(t, h, d)) check.fail("test model of " + at("index_q", t, h, d) + " disagrees");
        compare(check, "index_q", dI, at("index_q", t, h, d), decode_idx(g_iq, i), r_iq.at(t, h, d), e.tol[d],
                Fmt::kIndexer);
      }
    }
    for (int h = 0; h < H; ++h) {
      HeadExpect e;
      if (real) e = expect_head(c, n_m, rp_m, &in_q.at(t, h, 0), w_q_.ptr(), pos3, Store::kBf16);
      for (int d = 0; d < D; ++d) {
        const int64_t i = (t * H + h) * D + d;
        const double q = bf16_value(g_q[i]), gate = bf16_value(g_gate[i]);
        check.close(at("gate", t, h, d), gate, r_gate.at(t, h, d), 0.0);
        if (!real) {
          check.close(at("q", t, h, d), q, 0.0, 0.0);
          continue;
        }
        if (e.value[d] != r_q.at(t, h, d)) check.fail("test model of " + at("q", t, h, d) + " disagrees");
        compare(check, "q", D, at("q", t, h, d), q, r_q.at(t, h, d), e.tol[d], Fmt::kBf16);
      }
    }
    for (int g = 0; g < G; ++g) {
      HeadExpect e;
      if (real) e = expect_head(c, n_m, rp_m, &in_k.at(t, g, 0), w_k_.ptr(), pos3, Store::kBf16);
      const int64_t slot = real ? l.main_slot[t] : -1;
      for (int d = 0; d < D; ++d) {
        const int64_t i = (t * G + g) * D + d;
        const double kv = bf16_value(g_k[i]);
        if (!real) {
          check.close(at("k_out", t, g, d), kv, 0.0, 0.0);
          continue;
        }
        if (e.value[d] != r_k.at(t, g, d)) check.fail("test model of " + at("k_out", t, g, d) + " disagrees");
        compare(check, "k_out", D, at("k_out", t, g, d), kv, r_k.at(t, g, d), e.tol[d], Fmt::kBf16);
        // The caches at the row's slot.
        const int64_t ci = (slot * G + g) * D + d;
        const double want_k = kv_.k(slot, g)[d];
        if (c.kv_dtype == KvDtype::kFp8) {
          const double s = c.k_scale;
          compare(check, "k_cache", D, at("k_cache", slot, g, d), decode_kv(k_after, ci, s), want_k,
                  s * tol::gpu_prepare_rounded_both(e.pre_tol[d] / s, std::fabs(want_k) / s, tol::kGpuPrepareFp8Unit,
                                                    tol::kGpuPrepareFp8Floor),
                  Fmt::kAsIs);
          if (c.precision.round_storage)  // the code of the GPU's own bf16 K, exactly
            check.equal(at("k_cache code", slot, g, d), k_after[ci], fp8_encode(kv / s, c.fp8_flavor));
          check.equal(at("v_cache code", slot, g, d), v_after[ci], kv_.codes(slot, g)[D + d]);
        } else {
          compare(check, "k_cache", D, at("k_cache", slot, g, d), decode_kv(k_after, ci, 1.0), want_k, e.tol[d],
                  Fmt::kBf16);
          check.equal(at("k_cache bits", slot, g, d), load_u16(k_after, ci), g_k[i]);
          check.equal(at("v_cache bits", slot, g, d), load_u16(v_after, ci), bf16_bits(r_v.at(t, g, d)));
        }
      }
    }
  }

  // ---- caches: rows the step wrote, and bytes it must not have touched ----
  const int64_t kv_row = int64_t{G} * D * static_cast<int64_t>(kv_bytes());
  std::vector<char> kv_written(static_cast<size_t>(kv_.num_slots()), 0);
  for (int64_t t = 0; t < valid; ++t) kv_written[static_cast<size_t>(l.main_slot[t])] = 1;
  for (int64_t s = 0; s < kv_.num_slots(); ++s) {
    if (kv_written[static_cast<size_t>(s)]) continue;
    const auto b = static_cast<size_t>(s * kv_row), e = static_cast<size_t>((s + 1) * kv_row);
    if (!std::equal(k_before.begin() + b, k_before.begin() + e, k_after.begin() + b) ||
        !std::equal(v_before.begin() + b, v_before.begin() + e, v_after.begin() + b))
      check.fail("main KV slot " + std::to_string(s) + " changed but no row of the step maps to it");
  }
  const int64_t comp_row = int64_t{dI} * static_cast<int64_t>(idx_bytes());
  std::vector<char> comp_written(static_cast<size_t>(comp_.num_rows()), 0);
  for (size_t i = 0; i < rows.slot.size(); ++i) {
    const int64_t slot = rows.slot[i];
    comp_written[static_cast<size_t>(slot)] = 1;
    for (int d = 0; d < dI; ++d)
      compare(check, "compressed", dI,
              "compressed[" + std::to_string(slot) + ", " + std::to_string(d) + "] (block " +
                  std::to_string(rows.block[i]) + ", row " + std::to_string(rows.token[i]) + ")",
              decode_idx(comp_after, slot * dI + d), rows.keys.at(static_cast<int64_t>(i), d), comp_expect[i].tol[d],
              Fmt::kIndexer);
  }
  for (int64_t s = 0; s < comp_.num_rows(); ++s)
    if (!comp_written[static_cast<size_t>(s)] &&
        !std::equal(comp_before.begin() + s * comp_row, comp_before.begin() + (s + 1) * comp_row,
                    comp_after.begin() + s * comp_row))
      check.fail("compressed row " + std::to_string(s) + " changed but the step completes no group there");
  for (size_t s = 0; s < ring_tags_.size(); ++s) {
    const auto slot = static_cast<int64_t>(s);
    const std::string where = "ring slot " + std::to_string(s);
    const size_t k0 = s * static_cast<size_t>(dI), r0 = s * 3;
    if (ring_written.count(slot) == 0) {
      if (std::memcmp(&ring_after[k0], &ring_before[k0], sizeof(float) * static_cast<size_t>(dI)) != 0 ||
          !std::equal(rope_after.begin() + r0, rope_after.begin() + r0 + 3, rope_before.begin() + r0))
        check.fail(where + " changed but no row of the step maps to it");
      continue;
    }
    int64_t rope3[3];
    const double* key = ring_.read(slot / C_, ring_.position_at(slot), rope3);
    for (int d = 0; d < dI; ++d) check.close(where + " key dim " + std::to_string(d), ring_after[k0 + d], key[d], 0.0);
    for (int ax = 0; ax < 3; ++ax) check.equal(where + " rope axis " + std::to_string(ax), rope_after[r0 + ax], rope3[ax]);
  }
  check.check_flips();
  for (int64_t t = 0; t < T; ++t)
    if (l.ring_slot[t] >= 0) ring_tags_[static_cast<size_t>(l.ring_slot[t])] = l.pos[t];
}

// ---- the program of steps -----------------------------------------------------

class GpuPrepare : public testing::TestWithParam<Case> {};

std::string param_name(const testing::TestParamInfo<Case>& info) { return case_name(info.param); }

TEST_P(GpuPrepare, MatchesReferenceThroughSteps) {
  const Case& k = GetParam();
  const uint64_t seed = case_seed(case_name(k));
  SCOPED_TRACE(testing::Message() << case_name(k) << ", seed " << seed << " (QSA_TEST_SEED overrides the base)");
  Session s(k, seed);
  const int r = s.ratio(), C = s.capacity();
  s.run(s.step({}, 3), 0);
  if (HasFailure()) return;
  // Requests 0 and 2 leave groups open with 2 and 3 members (r >= 4);
  // request 1 ends one token short of completing a group after step 2.
  s.run(s.step({r + 2, 3 * r - 2, 3}, 2), 1);
  if (HasFailure()) return;
  s.run(s.step({C + 2 * r + 3, 1, r + 1}, 3), 2);
  if (HasFailure()) return;
  s.run(s.step({1, 1, 1}, 1), 3);
}

constexpr IndexerDtype kIB = IndexerDtype::kBf16, kI8 = IndexerDtype::kFp8;
constexpr KvDtype kKB = KvDtype::kBf16, kK8 = KvDtype::kFp8;
constexpr Fp8Flavor kFn = Fp8Flavor::kE4m3fn, kFnuz = Fp8Flavor::kE4m3fnuz;
constexpr RopeStyle kNeox = RopeStyle::kNeox, kGptj = RopeStyle::kGptj;

INSTANTIATE_TEST_SUITE_P(
    Sweep, GpuPrepare,
    testing::Values(Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, false, kNeox},
                    Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox},
                    Case{false, 4, Knobs::kHfEager, kIB, kKB, kFn, true, kNeox},
                    Case{false, 4, Knobs::kExact, kIB, kKB, kFn, true, kNeox},
                    Case{false, 4, Knobs::kExactAngles, kIB, kKB, kFn, true, kNeox},
                    Case{false, 4, Knobs::kBf16InvFreq, kIB, kKB, kFn, true, kNeox},
                    Case{false, 4, Knobs::kEngine, kI8, kKB, kFn, false, kNeox},
                    Case{false, 4, Knobs::kEngine, kIB, kK8, kFn, true, kNeox},
                    Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, true, kGptj},
                    Case{false, 1, Knobs::kEngine, kIB, kKB, kFn, false, kNeox},
                    Case{false, 1, Knobs::kHfEager, kI8, kK8, kFn, true, kNeox},
                    Case{false, 8, Knobs::kEngine, kI8, kK8, kFn, true, kNeox},
                    Case{false, 8, Knobs::kHfEager, kI8, kK8, kFnuz, false, kNeox},
                    Case{false, 8, Knobs::kExact, kI8, kK8, kFnuz, true, kNeox},
                    Case{false, 64, Knobs::kEngine, kIB, kKB, kFn, true, kNeox},
                    Case{false, 64, Knobs::kHfEager, kI8, kK8, kFn, false, kNeox},
                    Case{true, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox},
                    Case{true, 4, Knobs::kHfEager, kI8, kK8, kFn, true, kNeox},
                    Case{true, 4, Knobs::kExact, kIB, kKB, kFn, false, kNeox},
                    Case{true, 8, Knobs::kEngine, kIB, kK8, kFnuz, true, kNeox},
                    // Bit-exact: every knob's arithmetic after the norm.
                    Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox, true},
                    Case{false, 4, Knobs::kHfEager, kI8, kK8, kFn, true, kNeox, true},
                    Case{false, 4, Knobs::kExact, kIB, kK8, kFnuz, true, kNeox, true},
                    Case{false, 4, Knobs::kExactAngles, kI8, kKB, kFnuz, true, kGptj, true},
                    Case{false, 8, Knobs::kBf16InvFreq, kIB, kKB, kFn, true, kNeox, true},
                    Case{true, 4, Knobs::kHfEager, kIB, kKB, kFn, true, kNeox, true},
                    Case{true, 4, Knobs::kExactAngles, kI8, kK8, kFn, true, kNeox, true},
                    // The kernel's widest build (16 tail slots per lane).
                    Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox, false, true},
                    Case{false, 8, Knobs::kHfEager, kI8, kK8, kFnuz, true, kGptj, false, true},
                    Case{false, 4, Knobs::kExact, kIB, kK8, kFn, true, kNeox, true, true},
                    // Element-by-element loads and stores.
                    Case{false, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox, false, false, true},
                    Case{true, 4, Knobs::kHfEager, kI8, kK8, kFn, true, kNeox, false, false, true},
                    Case{false, 8, Knobs::kExact, kIB, kK8, kFnuz, true, kGptj, true, false, true},
                    // Two pair slots at the model's head dims.
                    Case{true, 4, Knobs::kEngine, kIB, kKB, kFn, true, kNeox, false, false, false, true},
                    Case{true, 4, Knobs::kHfEager, kI8, kK8, kFnuz, true, kGptj, true, false, false, true}),
    param_name);

// ---- storage encoders (host code shared with the kernel) ------------------------

// Doubles around the interesting points of a format: near rounding ties of
// bf16 and fp8, around their largest values, subnormals, and random ones.
std::vector<double> codec_inputs() {
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 448.0, 464.0, -464.0, 465.0, 240.0, 248.0, 1023.99, 1024.0, 1e30,
                            -1e30, 3.3895313892515355e38, 3.4e38, 1e300, 0x1p-9, 0x1p-10, 0x1p-11, 0x1p-133, 0x1p-134,
                            1e-45, 1e-300};
  const CounterRng rng(0x5eedc0de5ULL, "prepare.codec");
  for (uint64_t i = 0; i < 200000; ++i) {
    const double mant = 1.0 + rng.uniform(3 * i);
    const int e = static_cast<int>(rng.bits(3 * i + 1) % 40) - 20;
    double x = std::ldexp(mant, e);
    switch (rng.bits(3 * i + 2) % 4) {
      case 0: break;
      case 1: x = std::ldexp(std::round(std::ldexp(mant, 7)) + 0.5, e - 7); break;  // a bf16 tie
      case 2: x = std::ldexp(std::round(std::ldexp(mant, 3)) + 0.5, e - 3); break;  // an fp8 tie
      case 3: x = std::ldexp(std::round(std::ldexp(mant, 7)) + 0.5, e - 7) * (1.0 + 0x1p-40); break;  // just past one
    }
    xs.push_back((i & 1) ? -x : x);
  }
  for (uint64_t i = 0; i < 2000; ++i) {  // bf16 subnormals and their ties
    const double mant = 1.0 + rng.uniform(1000000 + i);
    const int e = -140 + static_cast<int>(i % 20);
    xs.push_back(std::ldexp(mant, e));
    xs.push_back(-std::ldexp(std::round(std::ldexp(mant, 7)) + 0.5, e - 7));
  }
  return xs;
}

TEST(GpuPrepareCodes, EncodersMatchTheReferenceCodecs) {
  using namespace gpu::prepare_detail;
  int failures = 0;
  for (double x : codec_inputs()) {
    if (bf16_bits_from_double(x) != bf16_bits(x) && failures++ < 10)
      ADD_FAILURE() << "bf16 of " << x << ": " << bf16_bits_from_double(x) << " vs reference " << bf16_bits(x);
    for (auto [flavor, kind] : {std::pair{Fp8Flavor::kE4m3fn, Fp8Kind::kE4m3fn},
                                std::pair{Fp8Flavor::kE4m3fnuz, Fp8Kind::kE4m3fnuz},
                                std::pair{Fp8Flavor::kE4m3fnEagerNan, Fp8Kind::kE4m3fnEagerNan}}) {
      const uint8_t got = fp8_encode_double(x, kind), want = fp8_encode(x, flavor);
      if (got != want && failures++ < 10)
        ADD_FAILURE() << "fp8 (" << to_string(flavor) << ") of " << x << ": " << int{got} << " vs reference "
                      << int{want};
    }
  }
  const double nan = std::nan("");
  EXPECT_EQ(bf16_bits_from_double(nan), bf16_bits(nan));
  EXPECT_EQ(fp8_encode_double(nan, Fp8Kind::kE4m3fnuz), fp8_encode(nan, Fp8Flavor::kE4m3fnuz));
  EXPECT_EQ(fp8_encode_double(-nan, Fp8Kind::kE4m3fn), fp8_encode(-nan, Fp8Flavor::kE4m3fn));
  EXPECT_EQ(fp8_encode_double(INFINITY, Fp8Kind::kE4m3fnEagerNan), fp8_encode(INFINITY, Fp8Flavor::kE4m3fnEagerNan));
  for (const std::array<int, 3>& s : {std::array<int, 3>{11, 11, 10}, std::array<int, 3>{3, 3, 2},
                                      std::array<int, 3>{0, 0, 0}, std::array<int, 3>{2, 4, 2}})
    for (int j = 0; j < 64; ++j) EXPECT_EQ(mrope_axis_of(j, 3 * s[1], 3 * s[2]), mrope_axis(s, j)) << "pair " << j;
}

// The kernel's bf16 encoders as they run on the device (on NVIDIA the
// hardware conversion, with the codec's NaN) against the host codecs, on
// the same inputs plus NaNs with payloads, infinities and fp32 subnormals.
TEST(GpuPrepareCodes, DeviceEncodersMatchTheHostCodecs) {
  std::vector<double> d = codec_inputs();
  // (A negative fp64 NaN is left out: the device's fp64 -> fp32 conversion
  // returns the canonical NaN, whatever the sign, as every fp64 operation
  // of the kernel and of the step driver's other kernels does.)
  for (uint64_t bits : {0x7ff8000000000001ULL, 0x7ff0000000000000ULL, 0xfff0000000000000ULL}) {
    double x = 0.0;
    std::memcpy(&x, &bits, sizeof x);
    d.push_back(x);
  }
  std::vector<float> f(d.size());
  for (size_t i = 0; i < d.size(); ++i) f[i] = static_cast<float>(d[i]);
  for (uint32_t bits : {0x7fa00001u, 0xffc12345u, 0x00000001u, 0x807fffffu}) f.push_back(gpu::bits_float(bits));
  d.resize(f.size(), -0.0);
  if (f.size() % 2 != 0) {
    f.push_back(1.0f);
    d.push_back(1.0);
  }
  const auto n = static_cast<int64_t>(f.size());
  const DeviceBuffer<float> d_f(f);
  const DeviceBuffer<double> d_d(d);
  DeviceBuffer<uint16_t> from_float(f.size()), from_double(f.size());
  DeviceBuffer<uint32_t> pairs(f.size());
  for (auto* b : {&from_float, &from_double}) b->poison(gpu::kPoisonBf16Pair);
  pairs.poison(gpu::kPoisonBf16Pair);
  gpu::encode_bf16_on_device(d_f.get(), d_d.get(), n, from_float.get(), from_double.get(), pairs.get(),
                             hipStream_t{});
  QSA_GPU_CHECK(hipDeviceSynchronize());
  const std::vector<uint16_t> got_f = from_float.download(), got_d = from_double.download();
  const std::vector<uint32_t> got_pair = pairs.download();
  int failures = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t want_f = gpu::float_to_bf16_bits(f[i]), want_d = bf16_bits(d[i]);
    const uint32_t want_pair = want_f | static_cast<uint32_t>(gpu::float_to_bf16_bits(f[i ^ 1])) << 16;
    if ((got_f[i] != want_f || got_d[i] != want_d || got_pair[i] != want_pair) && failures++ < 10)
      ADD_FAILURE() << "input " << i << " (float bits " << gpu::float_bits(f[i]) << ", double " << d[i]
                    << "): device " << got_f[i] << " / " << got_d[i] << " / " << got_pair[i] << ", host " << want_f
                    << " / " << want_d << " / " << want_pair;
  }
}

// ---- validator and launcher rejections ------------------------------------------

struct ValidatorFixture {
  QsaConfig c = config_preset("tiny");  // r 4, C 4, pages of 16
  CacheGeometry geo{6, 6};
  gpu::PrepareParams p = gpu::make_prepare_params(c, geo.num_pages);
  std::vector<int64_t> tags;
  StepLayout l;  // request 0: chunk 6..19 (its group 1 straddles), request 1: decode at 3
  ValidatorFixture() : tags(static_cast<size_t>(geo.num_ring_blocks * c.ring_capacity()), -1) {
    StepMetadata m = simple_step({6, 3}, {14, 1}, 3, 2);
    l = derive_step_layout(c, geo, m);
    // Positions 2..5 of request 0 (ring block 0), 0..2 of request 1 (block 3).
    for (int64_t q = 2; q < 6; ++q) tags[static_cast<size_t>(q % 4)] = q;
    for (int64_t q = 0; q < 3; ++q) tags[static_cast<size_t>(12 + q)] = q;
  }
};

std::string rejection(const ValidatorFixture& f, const StepLayout& l, const std::vector<int64_t>& tags) {
  return test::input_error_message([&] { gpu::validate_prepare(f.p, l, tags); });
}

void expect_contains(const std::string& msg, const std::string& part) {
  EXPECT_NE(msg.find(part), std::string::npos) << "message '" << msg << "' lacks '" << part << "'";
}

TEST(GpuPrepareValidate, AcceptsDerivedLayoutsAndRejectsBadOnes) {
  const ValidatorFixture f;
  ASSERT_NO_THROW(gpu::validate_prepare(f.p, f.l, f.tags));

  std::vector<int64_t> tags = f.tags;
  tags[4 % 4] = 8;  // position 4 (member of request 0's straddling group 1) overwritten
  std::string msg = rejection(f, f.l, tags);
  expect_contains(msg, "overwritten");
  expect_contains(msg, "position 4");
  tags = f.tags;
  tags[12 + 1] = -1;  // request 1's group 0 member 1 never written
  expect_contains(rejection(f, f.l, tags), "never written");

  StepLayout l = f.l;
  l.main_slot[3] = 6 * 16;
  expect_contains(rejection(f, l, f.tags), "main_slot[3]");
  l = f.l;
  l.main_slot[5] = l.main_slot[4];
  expect_contains(rejection(f, l, f.tags), "both write KV slot");
  l = f.l;
  l.ring_slot[0] = 1;  // row 0 is not among request 0's last C rows
  expect_contains(rejection(f, l, f.tags), "ring_slot[0]");
  l = f.l;
  l.ring_slot[13] = -1;
  expect_contains(rejection(f, l, f.tags), "ring_slot[13]");
  l = f.l;
  l.compressed_slot[0] = 3;  // position 6 completes no group
  expect_contains(rejection(f, l, f.tags), "completes no group");
  l = f.l;
  l.compressed_slot[1] = 6 * 4;  // position 7 does, but the cache has 24 rows
  expect_contains(rejection(f, l, f.tags), "compressed_slot[1]");
  l = f.l;
  l.compressed_slot[5] = l.compressed_slot[1];
  expect_contains(rejection(f, l, f.tags), "both write compressed row");
  l = f.l;
  l.token_to_req[2] = 1;
  expect_contains(rejection(f, l, f.tags), "token_to_req[2]");
  l = f.l;
  l.token_to_req[16] = 0;  // a padding row
  expect_contains(rejection(f, l, f.tags), "token_to_req[16]");
  l = f.l;
  l.pos[7] += 1;
  expect_contains(rejection(f, l, f.tags), "pos[7]");
  l = f.l;
  l.rope_pos.at(2, 4) = -5;
  expect_contains(rejection(f, l, f.tags), "rope_pos[2, 4]");
  l = f.l;
  l.ring_blocks[1] = l.ring_blocks[0];
  expect_contains(rejection(f, l, f.tags), "share ring block");
  l = f.l;
  l.ring_blocks[1] = 6;
  expect_contains(rejection(f, l, f.tags), "ring_blocks[1]");
  l = f.l;
  l.starts[1] = l.starts[0];
  expect_contains(rejection(f, l, f.tags), "strictly increasing");
  l = f.l;
  l.starts.pop_back();
  expect_contains(rejection(f, l, f.tags), "starts has");
  expect_contains(rejection(f, f.l, std::vector<int64_t>(f.tags.begin(), f.tags.end() - 1)), "whole number");

  gpu::PrepareParams p = f.p;
  p.kv.dtype = KvDtype::kOctaveK3V4;
  EXPECT_THROW(gpu::validate_prepare(p, f.l, f.tags), ConfigError);
  p = f.p;
  p.head_dim = p.norm_q.dim = p.norm_k.dim = p.rope_main.head_dim = p.kv.head_dim = gpu::kPrepareMaxHeadDim + 2;
  EXPECT_THROW(gpu::validate_prepare(p, f.l, f.tags), ConfigError);
  p = f.p;
  p.norm_q.dim = 16;
  EXPECT_THROW(gpu::validate_prepare(p, f.l, f.tags), ConfigError);
  p = f.p;
  p.rope_index.rotary_dim = p.indexer_dim + 2;
  EXPECT_THROW(gpu::validate_prepare(p, f.l, f.tags), ConfigError);
  p = f.p;
  p.compress.ring_capacity = 2;
  EXPECT_THROW(gpu::validate_prepare(p, f.l, f.tags), ConfigError);
}

TEST(GpuPrepareValidate, LauncherRejectsNullPointersAndSkipsEmptySteps) {
  const ValidatorFixture f;
  const gpu::PrepareLayout pl{f.l.num_tokens, f.l.num_reqs, static_cast<int64_t>(f.tags.size()), 6 * 4, 6 * 16};
  const std::string msg = test::input_error_message([&] { gpu::launch_prepare(f.p, pl, gpu::PrepareArgs{}, hipStream_t{}); });
  expect_contains(msg, "index_qk");
  EXPECT_NO_THROW(gpu::launch_prepare(f.p, gpu::PrepareLayout{0, 0, 24, 24, 96}, gpu::PrepareArgs{}, hipStream_t{}));
  gpu::PrepareParams p = f.p;
  p.kv.dtype = KvDtype::kOctaveK3V3;
  EXPECT_THROW(gpu::launch_prepare(p, pl, gpu::PrepareArgs{}, hipStream_t{}), ConfigError);
}

}  // namespace
}  // namespace qsa
