// The GPU benchmarks' host inputs (harness/bench/batch_metadata.hpp): every
// row selects min(V, K_B) distinct visible blocks; with a share s the
// neighbouring rows of a prefill chunk overlap as the model says (Jaccard
// s / (2 - s), measured with harness/selection_locality.hpp); share 0 and a
// request's first row draw exactly as before; QSA_BENCH_SHARE's parser.
#include <gtest/gtest.h>

#include <set>

#include "harness/bench/batch_metadata.hpp"
#include "harness/selection_locality.hpp"
#include "reference/core/config.hpp"

namespace qsa::bench {
namespace {

constexpr uint64_t kSeed = 20261201;

QsaConfig config() { return config_preset("qwen4-exp"); }

// A 1024-row prefill chunk after 16K cached tokens: about 4100 visible
// blocks per row against a budget of 512.
StepShape chunk() { return prefill_shape(1024, 16384); }

BatchMetadata make(const StepShape& s, double share, Want want = Want::kBlockIds) {
  const QsaConfig c = config();
  const PagePool pool = make_page_pool(pages_per_request(c, s), 1 << 20, true, kSeed);
  return make_batch_metadata(c, s, pool, 0, kSeed, want, share);
}

std::vector<int32_t> query_start_loc(const StepShape& s) {
  std::vector<int32_t> qsl{0};
  for (const RequestChunk& q : s.requests) qsl.push_back(qsl.back() + static_cast<int32_t>(q.query_len));
  return qsl;
}

void expect_valid_rows(const BatchMetadata& m, int kb, double share) {
  for (int64_t t = 0; t < m.block_ids.dim(0); ++t) {
    const int64_t v = m.visible[static_cast<size_t>(t)];
    const int64_t k = std::min<int64_t>(v, kb);
    std::set<int32_t> ids;
    for (int64_t j = 0; j < kb; ++j) {
      const int32_t b = m.block_ids.at(t, j);
      if (j >= k) {
        ASSERT_EQ(b, -1) << "row " << t << " share " << share;
        continue;
      }
      ASSERT_GE(b, 0) << "row " << t << " share " << share;
      ASSERT_LT(b, v) << "row " << t << " share " << share;
      ids.insert(b);
    }
    ASSERT_EQ(static_cast<int64_t>(ids.size()), k) << "row " << t << " repeats a block, share " << share;
  }
}

TEST(BatchMetadata, RowsSelectDistinctVisibleBlocks) {
  const int kb = config().blocks_budget();
  for (const double share : {0.0, 0.5, 0.95, 1.0}) expect_valid_rows(make(chunk(), share), kb, share);
  // Rows whose visible blocks hardly exceed the budget take the shuffle path
  // of the fill: a chunk starting at 2048 cached tokens (512 visible blocks).
  for (const double share : {0.0, 0.3}) expect_valid_rows(make(prefill_shape(256, 2048), share), kb, share);
}

TEST(BatchMetadata, NeighbouringRowsShareAsModelled) {
  const StepShape s = chunk();
  const int kb = config().blocks_budget();
  double last_reuse = 0.0;
  for (const double share : {0.0, 0.5, 0.9, 0.95}) {
    const BatchMetadata m = make(s, share);
    const SelectionLocality l = selection_locality(m.block_ids, query_start_loc(s), {8});
    // A row keeps share·K_B blocks of the previous row; of its (1 - share)·K_B
    // new draws, a fraction (1 - share)·K_B / (V - share·K_B) hits the
    // previous row's other blocks by chance (batch_metadata.hpp).
    double v = 0.0;
    for (const int32_t x : m.visible) v += x;
    v /= static_cast<double>(m.visible.size());
    const double shared = share + (1.0 - share) * (1.0 - share) * kb / (v - share * kb);
    EXPECT_NEAR(l.jaccard(), shared / (2.0 - shared), 0.01) << "share " << share << ", seed " << kSeed;
    // Tiles of 8 rows: at least the reuse without chance hits, and more with
    // every step of the share.
    EXPECT_GE(l.tiles[0].reuse(), 8.0 / (1.0 + 7.0 * (1.0 - share)) - 0.01) << "share " << share;
    EXPECT_GT(l.tiles[0].reuse(), last_reuse) << "share " << share;
    last_reuse = l.tiles[0].reuse();
  }
  const BatchMetadata same = make(s, 1.0);
  const SelectionLocality l = selection_locality(same.block_ids, query_start_loc(s), {8});
  EXPECT_DOUBLE_EQ(l.jaccard(), 1.0);
  EXPECT_DOUBLE_EQ(l.tiles[0].reuse(), 8.0);
}

TEST(BatchMetadata, ShareZeroAndFirstRowsDrawAsBefore) {
  // A request's first row ignores the share, so decode rows (one per request)
  // and the first row of a chunk are the same whatever it is.
  const StepShape decode = decode_shape(8, 32768);
  const BatchMetadata a = make(decode, 0.0);
  const BatchMetadata b = make(decode, 0.9);
  EXPECT_EQ(a.block_ids.data, b.block_ids.data);
  const BatchMetadata c0 = make(chunk(), 0.0);
  const BatchMetadata c9 = make(chunk(), 0.9);
  const int kb = config().blocks_budget();
  for (int j = 0; j < kb; ++j) EXPECT_EQ(c0.block_ids.at(0, j), c9.block_ids.at(0, j));
  // and the rows after it do change.
  EXPECT_NE(c0.block_ids.data, c9.block_ids.data);
}

TEST(BatchMetadata, TokenRowsFollowTheSharedSelections) {
  // Fewer distinct K/V tokens when rows share (the attention floor's KV
  // term); with share 1 every row attends the first row's 512 blocks plus its
  // own open group.
  const StepShape s = prefill_shape(256, 16384);
  const int64_t independent = make(s, 0.0, Want::kTokenIdx).unique_kv_tokens;
  const int64_t shared = make(s, 0.95, Want::kTokenIdx).unique_kv_tokens;
  const int64_t same = make(s, 1.0, Want::kTokenIdx).unique_kv_tokens;
  EXPECT_LT(shared, independent) << "seed " << kSeed;
  EXPECT_LE(same, 512 * 4 + 256) << "seed " << kSeed;
  EXPECT_GE(same, 512 * 4) << "seed " << kSeed;
}

TEST(BatchMetadata, RejectsAShareOutsideZeroToOne) {
  const QsaConfig c = config();
  const StepShape s = chunk();
  const PagePool pool = make_page_pool(pages_per_request(c, s), 16, true, kSeed);
  EXPECT_THROW(make_batch_metadata(c, s, pool, 0, kSeed, Want::kBlockIds, 1.5), InputError);
  EXPECT_THROW(make_batch_metadata(c, s, pool, 0, kSeed, Want::kBlockIds, -0.1), InputError);
}

TEST(BatchMetadata, ParsesQsaBenchShare) {
  EXPECT_DOUBLE_EQ(parse_selection_share("0.9"), 0.9);
  EXPECT_DOUBLE_EQ(parse_selection_share("1"), 1.0);
  EXPECT_DOUBLE_EQ(parse_selection_share("0"), 0.0);
  for (const char* bad : {"", "x", "0.9x", "1.01", "-0.5", "nan", "inf"}) {
    try {
      parse_selection_share(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("QSA_BENCH_SHARE"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace qsa::bench
