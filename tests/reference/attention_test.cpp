// Sparse GQA attention (spec section 7): which ids count, what a stale slot
// does, hand-checkable softmaxes, agreement with dense causal attention and a
// naive per-head loop, and the bf16 probability variants.
#include "reference/attention.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x5eed0a77e7ULL;

QsaConfig tiny(PrecisionProfile profile = PrecisionProfile::kExact) {
  QsaConfig c = config_preset("tiny");
  apply_profile(c, profile);
  return c;
}

// One step of `simple_step` requests against a cache holding every token
// 0..L-1 of each request with fresh random K and V.
struct StepCase {
  QsaConfig config;
  StepMetadata meta;
  StepLayout layout;
  MainKvCache cache;
  AttentionParams params;
  TensorD q;  // [T, H, D]
};

StepCase make_setup(const QsaConfig& c, const std::vector<int32_t>& ctx, const std::vector<int32_t>& qlens,
                 int32_t pages_per_req, uint64_t seed, int64_t padding = 0) {
  const int64_t pages = static_cast<int64_t>(qlens.size()) * pages_per_req;
  StepMetadata meta = simple_step(ctx, qlens, pages_per_req, padding);
  StepLayout layout = derive_step_layout(c, {pages, pages}, meta);
  MainKvCache cache(make_kv_cache_params(c, pages));
  const int64_t GD = int64_t{c.num_kv_heads} * c.head_dim;
  const CounterRng rk(seed, "attention.k"), rv(seed, "attention.v"), rq(seed, "attention.q");
  std::vector<double> k(GD), v(GD);
  for (int i = 0; i < layout.num_reqs; ++i)
    for (int64_t t = 0; t < layout.seq_lens[i]; ++t) {
      const int64_t slot = paged_slot(layout.block_table, i, t, c.page_size);
      for (int64_t j = 0; j < GD; ++j) {
        k[j] = rk.normal(slot * GD + j);
        v[j] = rv.normal(slot * GD + j);
      }
      cache.write(slot, t, k.data(), v.data());
    }
  TensorD q({layout.num_tokens, c.num_heads, c.head_dim});
  for (int64_t i = 0; i < q.numel(); ++i) q.data[i] = rq.normal(i);
  return {c, meta, layout, cache, make_attention_params(c), q};
}

TensorI32 index_rows(const StepCase& s, const std::vector<std::vector<int32_t>>& rows) {
  TensorI32 idx({s.layout.num_tokens, s.params.index_width}, -1);
  for (size_t r = 0; r < rows.size(); ++r)
    std::copy(rows[r].begin(), rows[r].end(), idx.row(static_cast<int64_t>(r)));
  return idx;
}

TensorD run_sparse(const StepCase& s, const TensorI32& idx, const AttentionParams* p = nullptr) {
  TensorD out({s.layout.num_tokens, s.config.num_heads, s.config.head_dim},
              std::numeric_limits<double>::quiet_NaN());
  sparse_attention(p ? *p : s.params, s.q, idx, s.layout, s.cache, out);
  return out;
}

int64_t slot_of(const StepCase& s, int req, int64_t t) {
  return paged_slot(s.layout.block_table, req, t, s.config.page_size);
}

// Plain per-head loops with the same knobs: an oracle for the GEMM path.
std::vector<double> naive_head(const AttentionParams& p, const double* qh, const MainKvCache& cache,
                               const std::vector<int64_t>& slots, int g) {
  const int D = p.head_dim;
  std::vector<double> s(slots.size()), out(D, 0.0);
  for (size_t j = 0; j < slots.size(); ++j) {
    double dot = 0.0;
    for (int d = 0; d < D; ++d) dot += qh[d] * cache.k(slots[j], g)[d];
    s[j] = p.round_logits ? round_bf16(round_bf16(dot) * p.scale) : dot * p.scale;
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double sum = 0.0;
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (size_t j = 0; j < slots.size(); ++j) {
    double w = s[j] / sum;
    if (p.p_rounding == PRounding::kBf16Unnormalized) w = round_bf16(s[j]) / sum;
    if (p.p_rounding == PRounding::kBf16Normalized) w = round_bf16(s[j] / sum);
    for (int d = 0; d < D; ++d) out[d] += w * cache.v(slots[j], g)[d];
  }
  return out;
}

// Largest |V| over the row's selected tokens: the natural scale of A.
double max_abs_v(const MainKvCache& cache, const std::vector<int64_t>& slots, int g, int D) {
  double m = 0.0;
  for (int64_t slot : slots)
    for (int d = 0; d < D; ++d) m = std::max(m, std::fabs(cache.v(slot, g)[d]));
  return m;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// A row set with -1s, out-of-range ids and repeats over two requests.
std::vector<std::vector<int32_t>> random_rows(const StepCase& s, uint64_t seed) {
  const CounterRng rng(seed, "attention.rows");
  std::vector<std::vector<int32_t>> rows;
  for (int64_t row = 0; row < s.layout.num_tokens; ++row) {
    std::vector<int32_t> ids(static_cast<size_t>(s.params.index_width));
    const int64_t L = row < s.layout.num_valid_tokens ? s.layout.seq_lens[s.layout.token_to_req[row]] : 4;
    for (size_t c = 0; c < ids.size(); ++c)
      ids[c] = static_cast<int32_t>(rng.bits(row * 64 + c) % static_cast<uint64_t>(L + 4)) - 2;
    rows.push_back(ids);
  }
  return rows;
}

std::vector<int64_t> valid_slots(const StepCase& s, const TensorI32& idx, int64_t row) {
  std::vector<int64_t> slots;
  const int req = s.layout.token_to_req[row];
  for (int64_t c = 0; c < s.params.index_width; ++c) {
    const int32_t t = idx.at(row, c);
    if (req >= 0 && t >= 0 && t < s.layout.seq_lens[req]) slots.push_back(slot_of(s, req, t));
  }
  return slots;
}

TEST(SparseAttention, RowsWithoutValidTokensOutputZero) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {10}, {2}, 1, kSeed, /*padding=*/1);
  const TensorD out = run_sparse(s, index_rows(s, {{-1, 12, -1, 30}, {3, 7}, {3, 7}}));  // L = 12
  const int64_t HD = int64_t{s.config.num_heads} * s.config.head_dim;
  for (int64_t i = 0; i < HD; ++i) {
    EXPECT_EQ(out.row(0)[i], 0.0) << "row 0 (no valid id), element " << i;
    EXPECT_EQ(out.row(2)[i], 0.0) << "row 2 (padding), element " << i;
    EXPECT_TRUE(std::isfinite(out.row(1)[i])) << "row 1 element " << i;
  }
}

TEST(SparseAttention, NegativeAndOutOfRangeIdsAreIgnored) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {10}, {1}, 1, kSeed);  // L = 11
  const TensorD noisy = run_sparse(s, index_rows(s, {{-1, 5, 11, -3, 2, 40, -1, 10}}));
  const TensorD clean = run_sparse(s, index_rows(s, {{5, 2, 10}}));
  EXPECT_EQ(noisy.data, clean.data);
}

TEST(SparseAttention, UnmappedPageIsIgnored) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {20}, {1}, 2, kSeed);  // tokens 0..15 on page 0, 16..20 on page 1
  const TensorD with_page0 = run_sparse(s, index_rows(s, {{3, 18, 20}}));
  StepMetadata meta = s.meta;
  meta.block_table.at(0, 0) = -1;  // page 0 evicted: token 3 is gone
  meta.ring_blocks = {0};
  s.layout = derive_step_layout(s.config, {2, 2}, meta);
  const TensorD unmapped = run_sparse(s, index_rows(s, {{3, 18, 20}}));
  const TensorD without = run_sparse(s, index_rows(s, {{18, 20}}));
  EXPECT_EQ(unmapped.data, without.data);
  EXPECT_NE(unmapped.data, with_page0.data) << "token 3 should have mattered while mapped";
}

TEST(SparseAttention, StaleSlotThrowsNamingTheSlot) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {10}, {1}, 1, kSeed);
  const int64_t slot3 = slot_of(s, 0, 3);
  const std::vector<double> kv(static_cast<size_t>(s.config.num_kv_heads) * s.config.head_dim, 0.5);
  s.cache.write(slot3, 99, kv.data(), kv.data());  // another token's data lands on token 3's slot
  const TensorI32 idx = index_rows(s, {{1, 3}});
  std::string msg = error_of([&] { run_sparse(s, idx); });
  EXPECT_NE(msg.find("slot " + std::to_string(slot3)), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 99"), std::string::npos) << msg;

  s.cache = MainKvCache(make_kv_cache_params(s.config, 1));  // nothing written yet
  msg = error_of([&] { run_sparse(s, idx); });
  EXPECT_NE(msg.find("slot " + std::to_string(slot_of(s, 0, 1))), std::string::npos) << msg;
  EXPECT_NE(msg.find("never written"), std::string::npos) << msg;
  TensorD out;
  EXPECT_THROW(dense_causal_attention(s.params, s.q, s.layout, s.cache, out), InputError);
}

TEST(SparseAttention, SingleTokenReturnsItsValue) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {10}, {1}, 1, kSeed);
  const TensorD out = run_sparse(s, index_rows(s, {{-1, 6}}));
  const int group = s.config.gqa_group();
  for (int h = 0; h < s.config.num_heads; ++h)
    for (int d = 0; d < s.config.head_dim; ++d)
      EXPECT_EQ(out.at(0, h, d), s.cache.v(slot_of(s, 0, 6), h / group)[d]) << "head " << h << " dim " << d;
}

TEST(SparseAttention, TwoTokensMatchHandSoftmax) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {1}, {1}, 1, kSeed);  // row at p = 1 sees tokens 0 and 1
  const int D = s.config.head_dim, G = s.config.num_kv_heads, group = s.config.gqa_group();
  // K_0 = 2 e_0 and K_1 = -e_0 in every group, Q_h = (h + 1) e_0: the logits
  // are 2(h+1)/sqrt(D) and -(h+1)/sqrt(D), so P_0 = 1 / (1 + exp(-3(h+1)/sqrt(D))).
  std::vector<double> k(static_cast<size_t>(G) * D, 0.0), v(k.size());
  const CounterRng rv(kSeed, "two-token.v");
  for (int t = 0; t < 2; ++t) {
    for (int g = 0; g < G; ++g) k[static_cast<size_t>(g) * D] = t == 0 ? 2.0 : -1.0;
    for (size_t j = 0; j < v.size(); ++j) v[j] = rv.normal(t * v.size() + j);
    s.cache.write(slot_of(s, 0, t), t, k.data(), v.data());
  }
  std::fill(s.q.data.begin(), s.q.data.end(), 0.0);
  for (int h = 0; h < s.config.num_heads; ++h) s.q.at(0, h, 0) = h + 1.0;
  const TensorD out = run_sparse(s, index_rows(s, {{0, 1}}));
  for (int h = 0; h < s.config.num_heads; ++h) {
    const double p0 = 1.0 / (1.0 + std::exp(-3.0 * (h + 1) / std::sqrt(double(D))));
    const int g = h / group;
    for (int d = 0; d < D; ++d) {
      const double v0 = s.cache.v(slot_of(s, 0, 0), g)[d], v1 = s.cache.v(slot_of(s, 0, 1), g)[d];
      EXPECT_NEAR(out.at(0, h, d), p0 * v0 + (1.0 - p0) * v1,
                  tol::kAttentionFp64Rel * std::max(std::fabs(v0), std::fabs(v1)))
          << "head " << h << " dim " << d;
    }
  }
}

TEST(SparseAttention, AllIdsMatchDenseCausal) {
  for (PrecisionProfile profile : {PrecisionProfile::kExact, PrecisionProfile::kEngine, PrecisionProfile::kHfEager}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile));
    StepCase s = make_setup(tiny(profile), {0, 7, 20}, {5, 3, 1}, 2, kSeed, /*padding=*/2);
    s.params.index_width = 32;  // room for every id 0..p
    std::vector<std::vector<int32_t>> in_order, reversed;
    for (int64_t row = 0; row < s.layout.num_valid_tokens; ++row) {
      std::vector<int32_t> ids(static_cast<size_t>(s.layout.pos[row] + 1));
      for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int32_t>(t);
      in_order.push_back(ids);
      reversed.emplace_back(ids.rbegin(), ids.rend());
    }
    TensorD dense;
    dense_causal_attention(s.params, s.q, s.layout, s.cache, dense);
    EXPECT_EQ(run_sparse(s, index_rows(s, in_order)).data, dense.data);
    if (profile != PrecisionProfile::kExact) continue;  // reordering may flip a bf16 rounding
    const TensorI32 rev_idx = index_rows(s, reversed);
    const TensorD rev = run_sparse(s, rev_idx);
    for (int64_t row = 0; row < s.layout.num_tokens; ++row) {
      const std::vector<int64_t> slots = valid_slots(s, rev_idx, row);
      for (int h = 0; h < s.config.num_heads; ++h) {
        const int g = h / s.config.gqa_group();
        const double scale = slots.empty() ? 0.0 : max_abs_v(s.cache, slots, g, s.config.head_dim);
        for (int d = 0; d < s.config.head_dim; ++d)
          EXPECT_NEAR(rev.at(row, h, d), dense.at(row, h, d), tol::kAttentionFp64Rel * scale)
              << "[row=" << row << ", head=" << h << ", dim=" << d << "]";
      }
    }
  }
}

TEST(SparseAttention, GqaHeadReadsItsGroup) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {12}, {1}, 1, kSeed);  // random K/V: the two groups differ
  const int H = s.config.num_heads, D = s.config.head_dim, group = s.config.gqa_group();
  for (int h = 1; h < H; ++h)
    for (int d = 0; d < D; ++d) s.q.at(0, h, d) = s.q.at(0, 0, d);  // one query for every head
  const std::vector<int32_t> ids = {0, 3, 5, 9, 12};
  const TensorD out = run_sparse(s, index_rows(s, {ids}));
  std::vector<int64_t> slots;
  for (int32_t t : ids) slots.push_back(slot_of(s, 0, t));
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    const std::vector<double> want = naive_head(s.params, &s.q.at(0, h, 0), s.cache, slots, g);
    const double scale = max_abs_v(s.cache, slots, g, D);
    for (int d = 0; d < D; ++d)
      EXPECT_NEAR(out.at(0, h, d), want[d], tol::kAttentionFp64Rel * scale) << "head " << h << " dim " << d;
  }
  for (int d = 0; d < D; ++d) {
    EXPECT_EQ(out.at(0, 0, d), out.at(0, group - 1, d)) << "heads of group 0 share K/V, dim " << d;
    EXPECT_EQ(out.at(0, group, d), out.at(0, H - 1, d)) << "heads of group 1 share K/V, dim " << d;
  }
  EXPECT_NE(out.at(0, 0, 0), out.at(0, group, 0)) << "groups 0 and 1 must read different K/V";
}

TEST(SparseAttention, CountColumnBoundsTheRow) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {10}, {1}, 1, kSeed);
  const TensorD first3 = run_sparse(s, index_rows(s, {{1, 2, 3}}));
  const TensorD all8 = run_sparse(s, index_rows(s, {{1, 2, 3, 4, 5, 6, 7, 8}}));
  AttentionParams p = s.params;
  p.count_column = true;
  p.index_width = s.params.index_width + 1;
  StepCase packed = s;
  packed.params = p;
  TensorI32 idx = index_rows(packed, {{1, 2, 3, 4, 5, 6, 7, 8}});
  for (auto [count, want] : {std::pair{3, &first3}, std::pair{100, &all8}}) {
    idx.at(0, p.index_width - 1) = count;  // 100 clamps to the width
    EXPECT_EQ(run_sparse(packed, idx).data, want->data) << "count " << count;
  }
  idx.at(0, p.index_width - 1) = -5;
  const TensorD none = run_sparse(packed, idx);
  for (double x : none.data) EXPECT_EQ(x, 0.0) << "a negative count leaves no candidate";
}

TEST(SparseAttention, MatchesNaiveLoopsForEveryKnob) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {9, 25}, {3, 2}, 2, kSeed, /*padding=*/1);
  const TensorI32 idx = index_rows(s, random_rows(s, kSeed));
  for (bool round_logits : {false, true})
    for (PRounding pr : {PRounding::kNone, PRounding::kBf16Unnormalized, PRounding::kBf16Normalized}) {
      SCOPED_TRACE(testing::Message() << "round_logits " << round_logits << " p " << to_string(pr));
      AttentionParams p = s.params;
      p.round_logits = round_logits;
      p.p_rounding = pr;
      const TensorD out = run_sparse(s, idx, &p);
      p.round_output = true;
      const TensorD rounded = run_sparse(s, idx, &p);
      for (int64_t row = 0; row < s.layout.num_tokens; ++row) {
        const std::vector<int64_t> slots = valid_slots(s, idx, row);
        for (int h = 0; h < s.config.num_heads; ++h) {
          const int g = h / s.config.gqa_group();
          std::vector<double> want(s.config.head_dim, 0.0);
          if (!slots.empty()) want = naive_head(p, &s.q.at(row, h, 0), s.cache, slots, g);
          const double scale = slots.empty() ? 0.0 : max_abs_v(s.cache, slots, g, s.config.head_dim);
          for (int d = 0; d < s.config.head_dim; ++d) {
            EXPECT_NEAR(out.at(row, h, d), want[d], tol::kAttentionFp64Rel * scale)
                << "[row=" << row << ", head=" << h << ", dim=" << d << "]";
            EXPECT_EQ(rounded.at(row, h, d), round_bf16(out.at(row, h, d)))
                << "round_output is one bf16 rounding of A, [row=" << row << ", head=" << h << "]";
          }
        }
      }
    }
}

TEST(SparseAttention, Bf16ProbabilitiesStayWithinTheirBound) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(), {9, 25}, {3, 2}, 2, kSeed);
  const TensorI32 idx = index_rows(s, random_rows(s, kSeed + 1));
  const TensorD exact = run_sparse(s, idx);
  for (PRounding pr : {PRounding::kBf16Unnormalized, PRounding::kBf16Normalized}) {
    SCOPED_TRACE(testing::Message() << "p " << to_string(pr));
    AttentionParams p = s.params;
    p.p_rounding = pr;
    const TensorD out = run_sparse(s, idx, &p);
    double worst = 0.0;
    for (int64_t row = 0; row < s.layout.num_tokens; ++row) {
      const std::vector<int64_t> slots = valid_slots(s, idx, row);
      for (int h = 0; h < s.config.num_heads; ++h) {
        const double scale = slots.empty() ? 0.0 : max_abs_v(s.cache, slots, h / s.config.gqa_group(), s.config.head_dim);
        for (int d = 0; d < s.config.head_dim; ++d) {
          const double diff = std::fabs(out.at(row, h, d) - exact.at(row, h, d));
          worst = std::max(worst, diff);
          EXPECT_LE(diff, tol::kAttentionBf16PRel * scale) << "[row=" << row << ", head=" << h << ", dim=" << d << "]";
        }
      }
    }
    EXPECT_GT(worst, 0.0) << "bf16 P rounding should change some output";
  }
}

TEST(SparseAttention, OctaveSinksAndWindowReadExactCopies) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  QsaConfig c = tiny();
  c.head_dim = 256;  // Octave needs 64-dim K blocks and a 64-dim RoPE block
  c.rotary_dim = 64;
  c.kv_dtype = KvDtype::kOctaveK3V4;
  c.octave_sinks = 2;
  c.octave_window = 4;
  StepCase s = make_setup(c, {39}, {1}, 3, kSeed);  // L = 40: the window is 36..39
  ASSERT_TRUE(s.params.octave_shadow);
  const int group = c.gqa_group();
  for (auto [t, exact] : {std::pair{1, true}, std::pair{2, false}, std::pair{20, false}, std::pair{35, false},
                          std::pair{36, true}}) {
    const TensorD out = run_sparse(s, index_rows(s, {{t}}));
    const int64_t slot = slot_of(s, 0, t);
    bool differs = false;
    for (int h = 0; h < c.num_heads; ++h)
      for (int d = 0; d < c.head_dim; ++d) {
        const double* v = exact ? s.cache.v_exact(slot, h / group) : s.cache.v(slot, h / group);
        EXPECT_EQ(out.at(0, h, d), v[d]) << "token " << t << " head " << h << " dim " << d;
        differs |= s.cache.v_exact(slot, h / group)[d] != s.cache.v(slot, h / group)[d];
      }
    EXPECT_TRUE(differs) << "the Octave decode of token " << t << " should be lossy";
  }
}

TEST(SparseAttention, ThreadCountDoesNotChangeResults) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  StepCase s = make_setup(tiny(PrecisionProfile::kEngine), {9, 25}, {3, 2}, 2, kSeed);
  const TensorI32 idx = index_rows(s, random_rows(s, kSeed + 2));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TensorD one = run_sparse(s, idx);
  omp_set_num_threads(3);
  const TensorD three = run_sparse(s, idx);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.data, three.data);
}

TEST(SparseAttention, RejectsMismatchedShapes) {
  StepCase s = make_setup(tiny(), {4}, {2}, 1, kSeed);
  TensorD out;
  const TensorI32 idx = index_rows(s, {});
  TensorI32 narrow({s.layout.num_tokens, s.params.index_width - 1}, -1);
  EXPECT_THROW(sparse_attention(s.params, s.q, narrow, s.layout, s.cache, out), InputError);
  TensorD short_q({s.layout.num_tokens, s.config.num_heads, s.config.head_dim - 1}, 1.0);
  EXPECT_THROW(sparse_attention(s.params, short_q, idx, s.layout, s.cache, out), InputError);
  AttentionParams wrong = s.params;
  wrong.kv_heads = 1;
  EXPECT_THROW(sparse_attention(wrong, s.q, idx, s.layout, s.cache, out), InputError);
}

}  // namespace
}  // namespace qsa
