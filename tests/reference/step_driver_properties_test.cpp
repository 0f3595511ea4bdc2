// Whole-step properties of the reference driver: chunking and batching never
// change a token's outputs, a budget covering the context reproduces dense
// attention, the engine profile stays within a bf16-derived distance of the
// exact one, and the thread count changes no bit.
#include "reference/step_driver.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/compress.hpp"
#include "reference/select.hpp"
#include "reference/core/config.hpp"
#include "reference/weights.hpp"
#include "tests/reference/driver_test_steps.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0xd41fe4ULL;
constexpr int32_t kPagesPerReq = 4;  // 64 tokens per request on tiny's 16-token pages

QsaConfig tiny(PrecisionProfile profile) {
  QsaConfig c = config_preset("tiny");
  apply_profile(c, profile);
  return c;
}

// Every per-token output of a step, by name, as doubles (ids are exact).
using StageRows = std::vector<std::pair<std::string, std::vector<double>>>;

template <class T>
std::vector<double> row_values(const Tensor<T>& x, int64_t row) {
  const int64_t w = x.numel() / x.dim(0);
  return std::vector<double>(x.row(row), x.row(row) + w);
}

StageRows token_rows(const StepOutputs& o, int64_t t) {
  return {{"index_q", row_values(o.index_q, t)},   {"raw_keys", row_values(o.raw_keys, t)},
          {"q", row_values(o.q, t)},               {"k", row_values(o.k, t)},
          {"v", row_values(o.v, t)},               {"gate", row_values(o.gate, t)},
          {"block_ids", row_values(o.block_ids, t)}, {"block_scores", row_values(o.block_scores, t)},
          {"token_idx", row_values(o.token_idx, t)}, {"attn", row_values(o.attn, t)},
          {"gated", row_values(o.gated, t)},       {"out", row_values(o.out, t)}};
}

// Outputs of one request's tokens by position, plus its compressed rows by
// block, over a whole step sequence.
struct RequestRecord {
  std::map<int64_t, StageRows> tokens;
  std::map<int64_t, std::vector<double>> compressed;
};

void record(const StepOutputs& o, int req_in_batch, RequestRecord& rec) {
  const StepLayout& l = o.layout;
  for (int64_t t = l.row_begin(req_in_batch); t < l.row_end(req_in_batch); ++t)
    rec.tokens[l.pos[static_cast<size_t>(t)]] = token_rows(o, t);
  for (size_t i = 0; i < o.compressed.block.size(); ++i)
    if (l.token_to_req[static_cast<size_t>(o.compressed.token[i])] == req_in_batch)
      rec.compressed[o.compressed.block[i]] = row_values(o.compressed.keys, static_cast<int64_t>(i));
}

// Bit-for-bit equality, reporting the first differing element of each stage
// and the stage's largest difference.
void expect_identical(const RequestRecord& a, const RequestRecord& b) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  std::map<std::string, double> worst;
  std::map<std::string, std::string> first;
  for (const auto& [pos, stages] : a.tokens) {
    const StageRows& other = b.tokens.at(pos);
    for (size_t s = 0; s < stages.size(); ++s) {
      const auto& [name, x] = stages[s];
      const std::vector<double>& y = other[s].second;
      ASSERT_EQ(x.size(), y.size()) << name;
      for (size_t j = 0; j < x.size(); ++j) {
        if (x[j] == y[j]) continue;
        worst[name] = std::max(worst[name], std::fabs(x[j] - y[j]));
        if (!first.count(name))
          first[name] = fmt::format("[pos={}, col={}] {} vs {}", pos, j, x[j], y[j]);
      }
    }
  }
  for (const auto& [name, where] : first)
    ADD_FAILURE() << "stage " << name << " differs, first at " << where << ", max |diff| " << worst[name];
  EXPECT_EQ(a.compressed, b.compressed);
}

// One request of `chunks` tokens in order, batched after a neighbour request
// of `neighbour` tokens per step when neighbour > 0.
RequestRecord run_request(const QsaConfig& c, const std::vector<int32_t>& chunks, int32_t neighbour, bool mrope) {
  test::LocalSteps steps(c, 2, kPagesPerReq, kSeed, mrope);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
  RequestRecord rec;
  for (int32_t n : chunks) {
    std::vector<test::Chunk> batch;
    if (neighbour > 0) batch.push_back({1, neighbour});
    batch.push_back({0, n});
    const test::BuiltStep s = steps.next(batch, /*padding=*/neighbour > 0 ? 2 : 0);
    record(driver.run(s.meta, s.hidden), neighbour > 0 ? 1 : 0, rec);
  }
  return rec;
}

TEST(StepDriverProperty, ChunkedPrefillMatchesOneChunkBitForBit) {
  const std::vector<std::vector<int32_t>> splits = {
      {10, 1, 26}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1}, {5, 2, 30}, std::vector<int32_t>(37, 1)};
  for (PrecisionProfile profile : {PrecisionProfile::kExact, PrecisionProfile::kEngine, PrecisionProfile::kHfEager}) {
    for (bool mrope : {false, true}) {
      const QsaConfig c = tiny(profile);
      const RequestRecord whole = run_request(c, {37}, 0, mrope);
      ASSERT_EQ(whole.tokens.size(), 37u);
      ASSERT_EQ(whole.compressed.size(), 9u);
      for (const auto& sizes : splits) {
        SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile) << " mrope "
                                        << mrope << " chunks " << sizes.size() << " starting " << sizes[0]);
        expect_identical(run_request(c, sizes, 0, mrope), whole);
      }
      // Batched after another request (and before padding rows): rows land
      // elsewhere in every projection tile.
      SCOPED_TRACE(testing::Message() << "seed " << kSeed << " profile " << to_string(profile) << " batched");
      expect_identical(run_request(c, {10, 1, 26}, 3, mrope), whole);
    }
  }
}

std::vector<int32_t> sorted_ids(const TensorI32& ids, int64_t t) {
  std::vector<int32_t> v;
  for (int64_t j = 0; j < ids.dim(1); ++j)
    if (ids.at(t, j) >= 0) v.push_back(ids.at(t, j));
  std::sort(v.begin(), v.end());
  return v;
}

// With K >= the context every visible block is selected, so each row attends
// to tokens 0..p: dense causal attention, up to fp64 summation order.
TEST(StepDriverProperty, FullBudgetSparseEqualsDense) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  QsaConfig c = tiny(PrecisionProfile::kExact);
  c.budget = 64;
  test::LocalSteps steps(c, 2, kPagesPerReq, kSeed);
  StepDriver driver(c, random_weights(c, kSeed), steps.geometry());
  const test::BuiltStep s = steps.next({{0, 40}, {1, 23}});
  const StepOutputs o = driver.run(s.meta, s.hidden);
  const StepLayout& l = o.layout;
  TensorD dense;
  dense_causal_attention(make_attention_params(c), o.q, l, driver.kv_cache(), dense);
  const int H = c.num_heads, G = c.num_kv_heads, D = c.head_dim;
  for (int64_t t = 0; t < l.num_tokens; ++t) {
    const int req = l.token_to_req[static_cast<size_t>(t)];
    const int64_t p = l.pos[static_cast<size_t>(t)];
    std::vector<int32_t> all_visible(static_cast<size_t>(l.visible_blocks[static_cast<size_t>(t)]));
    std::iota(all_visible.begin(), all_visible.end(), 0);
    ASSERT_EQ(sorted_ids(o.block_ids, t), all_visible) << "row " << t << " position " << p;
    std::vector<int32_t> ids, causal(static_cast<size_t>(p + 1));  // the row names exactly 0..p
    for (int64_t j = 0; j < o.token_idx.dim(1); ++j)
      if (o.token_idx.at(t, j) >= 0) ids.push_back(o.token_idx.at(t, j));
    std::sort(ids.begin(), ids.end());
    std::iota(causal.begin(), causal.end(), 0);
    ASSERT_EQ(ids, causal) << "row " << t;
    for (int g = 0; g < G; ++g) {
      double v_max = 0.0;  // max |V| over the row's tokens (all in this step)
      for (int64_t u = l.row_begin(req); u <= t; ++u)
        for (int d = 0; d < D; ++d) v_max = std::max(v_max, std::fabs(o.v.at(u, g, d)));
      for (int h = g * (H / G); h < (g + 1) * (H / G); ++h)
        for (int d = 0; d < D; ++d)
          ASSERT_NEAR(o.attn.at(t, h, d), dense.at(t, h, d), tol::kAttentionFp64Rel * v_max)
              << "[row=" << t << ", head=" << h << ", dim=" << d << "]";
    }
  }
}

struct ProfileRun {
  std::vector<StepOutputs> steps;
  std::unique_ptr<StepDriver> driver;
};

// Mixed prefill, decode steps in both batch orders, a chunk next to a decode.
ProfileRun run_profile(PrecisionProfile profile, int budget, uint64_t seed) {
  QsaConfig c = tiny(profile);
  c.budget = budget;
  test::LocalSteps steps(c, 2, kPagesPerReq, seed);
  ProfileRun run{{}, std::make_unique<StepDriver>(c, random_weights(c, seed), steps.geometry())};
  for (const auto& batch : std::vector<std::vector<test::Chunk>>{
           {{0, 37}, {1, 29}}, {{1, 1}, {0, 1}}, {{0, 1}, {1, 1}}, {{0, 9}, {1, 1}}}) {
    const test::BuiltStep s = steps.next(batch);
    run.steps.push_back(run.driver->run(s.meta, s.hidden));
  }
  return run;
}

// The engine's storage roundings move the layer output a bounded relative L2
// distance from the unrounded computation. A selection may flip where block
// scores nearly tie; a flipped row attends other tokens, so its output is not
// close and is left out. Instead every block score must move by less than
// its bound, so that any flip is a near-tie.
TEST(StepDriverProperty, EngineProfileStaysNearExact) {
  for (uint64_t seed : {kSeed, uint64_t{5}, uint64_t{11}}) {  // 5 and 11 flip rows at budget 16
    for (int budget : {16, 64}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " budget " << budget);
      const ProfileRun ex = run_profile(PrecisionProfile::kExact, budget, seed);
      const ProfileRun en = run_profile(PrecisionProfile::kEngine, budget, seed);
      const SelectParams sp = make_select_params(ex.driver->config());
      const int HI = sp.heads, dI = sp.dim;
      int flipped = 0;
      for (size_t i = 0; i < ex.steps.size(); ++i) {
        SCOPED_TRACE(testing::Message() << "step " << i);
        const StepOutputs& a = ex.steps[i];
        const StepOutputs& b = en.steps[i];
        const StepLayout& l = a.layout;
        const int64_t w = a.out.numel() / a.out.dim(0);
        double num = 0.0, den = 0.0;
        for (int64_t t = 0; t < l.num_tokens; ++t) {
          const int req = l.token_to_req[static_cast<size_t>(t)];
          const int32_t V = l.visible_blocks[static_cast<size_t>(t)];
          const TensorD kx = gather_compressed_keys(l, req, V, ex.driver->compressed_cache());
          const TensorD kn = gather_compressed_keys(l, req, V, en.driver->compressed_cache());
          std::vector<double> sx(static_cast<size_t>(V)), sn(static_cast<size_t>(V)), bound(static_cast<size_t>(V));
          block_scores_row(sp, a.index_q.row(t), kx.ptr(), V, sx.data());
          block_scores_row(sp, b.index_q.row(t), kn.ptr(), V, sn.data());
          for (int32_t blk = 0; blk < V; ++blk) {
            double norms = 0.0;  // s * sum_h |q_h| |k_b|
            const Eigen::Map<const Eigen::VectorXd> k(kx.row(blk), dI);
            for (int h = 0; h < HI; ++h)
              norms += Eigen::Map<const Eigen::VectorXd>(a.index_q.row(t) + int64_t{h} * dI, dI).norm() * k.norm();
            bound[static_cast<size_t>(blk)] = tol::driver_engine_score_shift_tol(sp.score_scale * norms, dI);
            EXPECT_LE(std::fabs(sn[static_cast<size_t>(blk)] - sx[static_cast<size_t>(blk)]),
                      bound[static_cast<size_t>(blk)])
                << "[row=" << t << ", block=" << blk << "]";
          }
          const std::vector<int32_t> set_x = sorted_ids(a.block_ids, t), set_n = sorted_ids(b.block_ids, t);
          if (set_x != set_n) {
            ++flipped;
            // Every engine-only block nearly ties with the exact k-th block.
            const int32_t kth = a.block_ids.at(t, static_cast<int64_t>(set_x.size()) - 1);
            for (int32_t blk : set_n) {
              if (std::binary_search(set_x.begin(), set_x.end(), blk)) continue;
              EXPECT_LE(sx[static_cast<size_t>(kth)] - sx[static_cast<size_t>(blk)],
                        bound[static_cast<size_t>(kth)] + bound[static_cast<size_t>(blk)])
                  << "[row=" << t << ", block=" << blk << "] is no near-tie with block " << kth;
            }
            continue;
          }
          for (int64_t j = 0; j < w; ++j) {
            const double d = b.out.at(t, j) - a.out.at(t, j);
            num += d * d;
            den += a.out.at(t, j) * a.out.at(t, j);
          }
        }
        EXPECT_LE(std::sqrt(num / den), tol::kDriverEngineVsExactOutRelL2);
      }
      if (budget >= 64) {
        EXPECT_EQ(flipped, 0) << "every visible block fits the budget";
      }
      RecordProperty("flipped_rows_seed" + std::to_string(seed) + "_budget" + std::to_string(budget), flipped);
    }
  }
}

}  // namespace
}  // namespace qsa
