// The paged main KV cache in each dtype: position tags, what bf16 / fp8 /
// Octave store and decode, and the exact shadow copies.
#include "reference/kv_cache.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/octave.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0xcac4e5eedULL;

KvCacheParams params_for(KvDtype dtype, bool round_storage) {
  QsaConfig c = config_preset("tiny");
  c.kv_dtype = dtype;
  if (c.kv_is_octave()) {  // Octave needs 64-dim K blocks and a 64-dim RoPE block
    c.head_dim = 256;
    c.rotary_dim = 64;
  }
  KvCacheParams p = make_kv_cache_params(c, /*num_pages=*/4);
  p.round_storage = round_storage;
  return p;
}

// Fresh N(0, sigma^2) values for one slot: [G * D].
std::vector<double> random_head_values(const KvCacheParams& p, uint64_t seed, const char* name, int64_t slot,
                                       double sigma = 1.0) {
  const CounterRng rng(seed, name);
  std::vector<double> x(static_cast<size_t>(p.kv_heads) * p.head_dim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = sigma * rng.normal(slot * x.size() + i);
  return x;
}

uint16_t u16_at(const uint8_t* b) { return static_cast<uint16_t>(b[0] | (b[1] << 8)); }

TEST(MainKvCache, RejectsImpossibleParams) {
  KvCacheParams p = params_for(KvDtype::kBf16, false);
  p.num_pages = 0;
  EXPECT_THROW(MainKvCache{p}, ConfigError);
  p = params_for(KvDtype::kFp8, false);
  p.k_scale = 0.0;
  EXPECT_THROW(MainKvCache{p}, ConfigError);
  p = params_for(KvDtype::kOctaveK3V4, false);
  p.head_dim = 32;  // no 64-dim blocks
  EXPECT_THROW(MainKvCache{p}, ConfigError);
}

TEST(MainKvCache, TagsRecordTheWrittenPosition) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const KvCacheParams p = params_for(KvDtype::kBf16, true);
  MainKvCache cache(p);
  EXPECT_EQ(cache.num_slots(), p.num_pages * p.page_size);
  for (int64_t s = 0; s < cache.num_slots(); ++s) EXPECT_EQ(cache.position_at(s), -1) << "slot " << s;
  const std::vector<double> k = random_head_values(p, kSeed, "k", 5), v = random_head_values(p, kSeed, "v", 5);
  cache.write(5, 37, k.data(), v.data());
  EXPECT_EQ(cache.position_at(5), 37);
  cache.write(5, 41, k.data(), v.data());  // a later token reusing the slot
  EXPECT_EQ(cache.position_at(5), 41);
  EXPECT_THROW(cache.write(cache.num_slots(), 0, k.data(), v.data()), InputError);
  EXPECT_THROW(cache.write(-1, 0, k.data(), v.data()), InputError);
  EXPECT_THROW(cache.write(0, -3, k.data(), v.data()), InputError);
}

TEST(MainKvCache, Bf16StoresExactOrRoundedValuesAndTheirBits) {
  for (bool round : {false, true}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " round_storage " << round);
    const KvCacheParams p = params_for(KvDtype::kBf16, round);
    MainKvCache cache(p);
    ASSERT_EQ(cache.code_bytes(), 4 * p.head_dim);
    const std::vector<double> k = random_head_values(p, kSeed, "k", 9), v = random_head_values(p, kSeed, "v", 9);
    cache.write(9, 3, k.data(), v.data());
    const int D = p.head_dim;
    for (int g = 0; g < p.kv_heads; ++g)
      for (int d = 0; d < D; ++d) {
        const double kx = k[g * D + d], vx = v[g * D + d];
        EXPECT_EQ(cache.k(9, g)[d], round ? round_bf16(kx) : kx) << "g " << g << " d " << d;
        EXPECT_EQ(cache.v(9, g)[d], round ? round_bf16(vx) : vx) << "g " << g << " d " << d;
        EXPECT_EQ(cache.k_exact(9, g)[d], cache.k(9, g)[d]);
        EXPECT_EQ(u16_at(cache.codes(9, g) + 2 * d), bf16_bits(kx)) << "K code, g " << g << " d " << d;
        EXPECT_EQ(u16_at(cache.codes(9, g) + 2 * (D + d)), bf16_bits(vx)) << "V code, g " << g << " d " << d;
      }
  }
}

TEST(MainKvCache, Fp8DecodesCodeTimesScaleAndSaturates) {
  for (Fp8Flavor flavor : {Fp8Flavor::kE4m3fn, Fp8Flavor::kE4m3fnuz}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " flavor " << to_string(flavor));
    KvCacheParams p = params_for(KvDtype::kFp8, true);
    p.fp8_flavor = flavor;
    p.k_scale = 0.375;
    p.v_scale = 2.5;
    MainKvCache cache(p);
    ASSERT_EQ(cache.code_bytes(), 2 * p.head_dim);
    const int D = p.head_dim;
    std::vector<double> k = random_head_values(p, kSeed, "k", 2, 4.0), v = random_head_values(p, kSeed, "v", 2, 4.0);
    k[0] = 1e6;  // far past fp8_max * scale
    v[1] = -1e6;
    cache.write(2, 0, k.data(), v.data());
    EXPECT_EQ(cache.k(2, 0)[0], fp8_max(flavor) * p.k_scale);
    EXPECT_EQ(cache.v(2, 0)[1], -fp8_max(flavor) * p.v_scale);
    for (int g = 0; g < p.kv_heads; ++g)
      for (int d = 0; d < D; ++d) {
        const uint8_t* code = cache.codes(2, g);
        EXPECT_EQ(cache.k(2, g)[d], fp8_decode(code[d], flavor) * p.k_scale) << "g " << g << " d " << d;
        EXPECT_EQ(cache.v(2, g)[d], fp8_decode(code[D + d], flavor) * p.v_scale) << "g " << g << " d " << d;
        const double kx = k[g * D + d], vx = v[g * D + d];
        if (std::fabs(kx) < fp8_max(flavor) * p.k_scale) {
          EXPECT_LE(std::fabs(cache.k(2, g)[d] - kx), tol::fp8_kv_tol(kx, p.k_scale)) << "g " << g << " d " << d;
        }
        if (std::fabs(vx) < fp8_max(flavor) * p.v_scale) {
          EXPECT_LE(std::fabs(cache.v(2, g)[d] - vx), tol::fp8_kv_tol(vx, p.v_scale)) << "g " << g << " d " << d;
        }
      }
  }
}

// Relative L2 accumulators of decode error, per bit width.
struct RelL2 {
  double err = 0.0, ref = 0.0;
  void add(const double* x, const double* y, int n) {
    for (int i = 0; i < n; ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref += x[i] * x[i];
    }
  }
  double value() const { return std::sqrt(err / ref); }
};

TEST(MainKvCache, OctaveDecodeWithinCodecBoundsAndShadowIsExact) {
  for (KvDtype dtype : {KvDtype::kOctaveK3V4, KvDtype::kOctaveK3V3, KvDtype::kOctaveK3V3Compact}) {
    SCOPED_TRACE(testing::Message() << "seed " << kSeed << " dtype " << to_string(dtype));
    const KvCacheParams p = params_for(dtype, true);
    MainKvCache cache(p);
    const OctaveLayout layout = octave_layout(octave_format(dtype), p.head_dim, p.rotary_dim);
    ASSERT_EQ(cache.code_bytes(), layout.slot_bytes);
    RelL2 by_bits[5];
    std::vector<double> kd(p.head_dim), vd(p.head_dim);
    for (int64_t slot = 0; slot < cache.num_slots(); ++slot) {
      const std::vector<double> k = random_head_values(p, kSeed, "k", slot), v = random_head_values(p, kSeed, "v", slot);
      cache.write(slot, slot, k.data(), v.data());
      for (int g = 0; g < p.kv_heads; ++g) {
        const double* kx = cache.k_exact(slot, g);
        const double* vx = cache.v_exact(slot, g);
        for (int d = 0; d < p.head_dim; ++d) {
          ASSERT_EQ(kx[d], round_bf16(k[g * p.head_dim + d])) << "the shadow holds the bf16 activation";
          ASSERT_EQ(vx[d], round_bf16(v[g * p.head_dim + d]));
        }
        octave_decode(layout, cache.codes(slot, g), kd.data(), vd.data());
        for (int d = 0; d < p.head_dim; ++d) {
          ASSERT_EQ(cache.k(slot, g)[d], kd[d]) << "reads decode the stored codes";
          ASSERT_EQ(cache.v(slot, g)[d], vd[d]);
        }
        for (const auto& [blocks, x, y] : {std::tuple{&layout.k_blocks, kx, cache.k(slot, g)},
                                           std::tuple{&layout.v_blocks, vx, cache.v(slot, g)}})
          for (const OctaveBlock& b : *blocks) {
            RelL2 one;
            one.add(x + b.first_dim, y + b.first_dim, b.dims);
            EXPECT_LE(one.value(), b.bits == 3 ? tol::kOctaveBlockRelL2Bits3 : tol::kOctaveBlockRelL2Bits4)
                << "slot " << slot << " head " << g << " block at " << b.first_dim;
            by_bits[b.bits].add(x + b.first_dim, y + b.first_dim, b.dims);
          }
      }
    }
    ASSERT_GT(by_bits[3].ref, 0.0);  // every format has 3-bit K blocks
    EXPECT_LE(by_bits[3].value(), tol::kOctaveRelL2Bits3);
    if (by_bits[4].ref > 0) {
      EXPECT_LE(by_bits[4].value(), tol::kOctaveRelL2Bits4);
    }
  }
}

TEST(MainKvCache, OctaveEncodesTheUnroundedInputWhenStorageRoundingIsOff) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const KvCacheParams p = params_for(KvDtype::kOctaveK3V3, false);
  MainKvCache cache(p);
  const OctaveLayout layout = octave_layout(OctaveFormat::kK3V3, p.head_dim, p.rotary_dim);
  const std::vector<double> k = random_head_values(p, kSeed, "k", 1), v = random_head_values(p, kSeed, "v", 1);
  cache.write(1, 0, k.data(), v.data());
  std::vector<uint8_t> slot(layout.slot_bytes);
  for (int g = 0; g < p.kv_heads; ++g) {
    octave_encode(layout, &k[g * p.head_dim], &v[g * p.head_dim], slot.data());
    EXPECT_EQ(std::vector<uint8_t>(cache.codes(1, g), cache.codes(1, g) + layout.slot_bytes), slot) << "g " << g;
    for (int d = 0; d < p.head_dim; ++d) EXPECT_EQ(cache.k_exact(1, g)[d], k[g * p.head_dim + d]);
  }
}

}  // namespace
}  // namespace qsa
