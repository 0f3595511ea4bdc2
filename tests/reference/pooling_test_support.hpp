// Helpers for the pooling tests: one request's raw keys, chunk layouts with
// mRoPE positions, and a runner that pools chunk after chunk in the driver's
// order (pool from the pre-step ring, then write the ring).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "reference/compress.hpp"
#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/reference/driver_test_steps.hpp"
#include "tests/test_support.hpp"

namespace qsa::test {

inline constexpr uint64_t kPoolingSeed = 0xc0435e55ULL;
inline constexpr int32_t kPages = 2;  // one request of up to 32 tokens (tiny: 16-token pages)

struct Pooling {
  QsaConfig c;
  CompressParams cp;
  RmsNormParams norm;
  RopeParams rope;
  TensorD k_norm;  // [d_I]
};

inline Pooling pooling(PrecisionProfile profile, bool zero_norm, uint64_t seed,
                IndexerDtype dtype = IndexerDtype::kBf16, Fp8Flavor flavor = Fp8Flavor::kE4m3fn) {
  Pooling s;
  s.c = config_preset("tiny");
  apply_profile(s.c, profile);
  s.c.indexer_dtype = dtype;
  s.c.fp8_flavor = flavor;
  s.cp = make_compress_params(s.c);
  s.norm = make_rms_norm_params(s.c, 1, s.c.indexer_head_dim);
  s.rope = make_rope_params(s.c, 1, s.c.indexer_head_dim);
  s.k_norm = TensorD({s.c.indexer_head_dim});
  const CounterRng rng(seed, "compress.k_norm");
  if (!zero_norm)
    for (int64_t d = 0; d < s.k_norm.numel(); ++d) s.k_norm.data[static_cast<size_t>(d)] = 0.1 * rng.normal(static_cast<uint64_t>(d));
  return s;
}

// Raw keys of tokens 0..n-1 of one request: [n, d_I], bf16 values as the
// projection stores them.
inline TensorD request_raw_keys(const QsaConfig& c, int64_t n, uint64_t seed) {
  TensorD k({n, c.indexer_head_dim});
  const CounterRng rng(seed, "compress.raw_keys");
  for (int64_t i = 0; i < k.numel(); ++i) k.data[static_cast<size_t>(i)] = round_bf16(rng.normal(static_cast<uint64_t>(i)));
  return k;
}

// Layout of one chunk [ctx, ctx + n) of request 0, with mRoPE positions whose
// h and w rows differ from t.
inline StepLayout chunk_layout(const QsaConfig& c, int32_t ctx, int32_t n) {
  StepMetadata m = simple_step({ctx}, {n}, kPages);
  m.positions = TensorI64({3, n});
  for (int a = 0; a < 3; ++a)
    for (int32_t o = 0; o < n; ++o) m.positions.at(a, o) = LocalSteps::rope_axis(a, 0, ctx + o);
  return derive_step_layout(c, {kPages, kPages}, m);
}

inline TensorD chunk_rows(const TensorD& all, int64_t from, int64_t n) {
  TensorD out({n, all.dim(1)});
  for (int64_t i = 0; i < n; ++i) std::copy_n(all.row(from + i), all.dim(1), out.row(i));
  return out;
}

struct PoolRun {
  RawKeyRing ring;
  CompressedCache cache;
  std::map<int64_t, std::vector<double>> rows;  // block -> stored key
  std::vector<CompressedRows> per_chunk;
};

inline PoolRun make_run(const Pooling& s) {
  return {RawKeyRing(kPages, s.c.ring_capacity(), s.c.indexer_head_dim),
          CompressedCache(kPages, s.c.compressed_rows_per_page(), s.c.indexer_head_dim), {}, {}};
}

// Pools one chunk then updates the ring, in the driver's order.
inline void pool_chunk(const Pooling& s, const TensorD& all, int32_t ctx, int32_t n, PoolRun& run) {
  const StepLayout l = chunk_layout(s.c, ctx, n);
  const TensorD raw = chunk_rows(all, ctx, n);
  CompressedRows rows = compress_completed_groups(s.cp, s.norm, s.rope, s.k_norm, l, raw, run.ring, run.cache);
  for (size_t i = 0; i < rows.block.size(); ++i) {
    const double* k = rows.keys.row(static_cast<int64_t>(i));
    EXPECT_TRUE(run.rows.emplace(rows.block[i], std::vector<double>(k, k + s.cp.dim)).second)
        << "block " << rows.block[i] << " pooled twice";
  }
  run.per_chunk.push_back(std::move(rows));
  write_ring(l, raw, run.ring);
}

inline PoolRun pool_in_chunks(const Pooling& s, const TensorD& all, const std::vector<int32_t>& sizes) {
  PoolRun run = make_run(s);
  int32_t ctx = 0;
  for (int32_t n : sizes) {
    pool_chunk(s, all, ctx, n, run);
    ctx += n;
  }
  return run;
}

inline void expect_same_rows(const PoolRun& a, const PoolRun& b) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (const auto& [block, key] : a.rows) {
    ASSERT_EQ(b.rows.count(block), 1u) << "block " << block;
    const std::vector<double>& other = b.rows.at(block);
    for (size_t d = 0; d < key.size(); ++d) ASSERT_EQ(key[d], other[d]) << "block " << block << " dim " << d;
  }
}

using test::input_error_message;


}  // namespace qsa::test
