// GPU select (gpu/select) against the fp64 reference (reference/select.hpp):
//  - phase 1: every visible block's fp32 score (read back from the scratch)
//    within the fp32-accumulation bound of the reference's fp64 score;
//  - phase 2: the ids and scores are exactly qsa::top_k_blocks applied to the
//    GPU's own fp32 scores (so the radix select and the sort are bit-exact);
//  - end to end: tie-aware agreement with qsa::select_rows, and identical ids
//    wherever the reference's scores around a position are further apart
//    than the accumulation bound;
//  - exact ties (duplicated keys) give the lower ids first exactly as the
//    reference; NaN scores rank first; every output element is written;
//  - the decode path's split kernels (rows longer than kSelectDecodeChunk)
//    and its fused kernel (shorter rows), its 16-byte key readers (d_I % 16
//    == 0: keys staged through shared memory, or read directly when too
//    long to stage) and its scalar one (other d_I, or a misaligned cache,
//    which must give the same bits as an aligned one);
//  - the element decoders (the scalar and the packed ones) and the sort key,
//    exhaustively against the reference codecs and block_precedes;
//    host-validator rejections.
// The scenario plumbing and the per-row checks are shared with the prefill
// path's test: tests/gpu/select_case.hpp.
#include "gpu/select/select.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "gpu/select/select_codes.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"
#include "reference/core/rng.hpp"
#include "reference/select.hpp"
#include "tests/gpu/select_case.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

using gpu::IndexerCodes;
using gpu::SelectLayout;
using select_test::GpuResult;
using select_test::Keys;
using select_test::RefResult;
using select_test::Scenario;

struct Case {
  int budget;   // K_B
  int visible;  // V of the widest rows
  int heads;
  int dim;
  IndexerDtype dtype;
  Fp8Flavor flavor;
  Keys keys;
};

std::string case_name(const Case& c) {
  std::string s = "KB" + std::to_string(c.budget) + "_V" + std::to_string(c.visible) + "_H" +
                  std::to_string(c.heads) + "_D" + std::to_string(c.dim) + "_";
  return s + select_test::codes_name(c.dtype, c.flavor) + select_test::keys_name(c.keys);
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

// A step of two requests sharing their pages between rows, with padding rows.
Scenario make_scenario(const Case& c, uint64_t seed) {
  Scenario s = select_test::scenario_for(c.heads, c.dim, c.budget, c.dtype, c.flavor, c.keys);
  s.rows_per_page = 48;  // not a power of two: exercises div / mod
  const int V = c.visible;
  // Request 0: decode rows at V, V - 1, V (MTP-like); request 1: two shorter rows.
  s.token_to_req = {0, 0, 0, -1, 1, 1, -1};
  s.visible = {V, std::max(V - 1, 0), V, 0, V / 7, std::min(V, 17), 0};
  const int v1 = std::max(V / 7, std::min(V, 17));
  const std::vector<int64_t> pages = {(V + s.rows_per_page - 1) / s.rows_per_page,
                                      (v1 + s.rows_per_page - 1) / s.rows_per_page};
  const int64_t max_pages = std::max(pages[0], pages[1]) + 1;  // the last column stays unmapped
  s.num_pages = pages[0] + pages[1] + 3;                          // three pages nobody maps
  select_test::map_shuffled_pages(s, pages, max_pages, seed, "select");
  select_test::fill_random_codes(s, seed, "select");

  if (c.keys == Keys::kTies) {
    // Every block of the mapped pages: 4 levels, exact ties (see make_exact_ties).
    select_test::make_exact_ties(s, {pages[0] * s.rows_per_page, pages[1] * s.rows_per_page}, seed, "select");
  } else if (c.keys == Keys::kNan) {
    // One NaN element in every 97th block of request 0 (eleven of them at V = 1000).
    for (int64_t b = 5; b < V; b += 97) s.set_nan_block(0, b);
  } else if (c.keys == Keys::kSampleHigh || c.keys == Keys::kSampleLow) {
    select_test::mark_sampled_blocks(s, V, c.keys == Keys::kSampleHigh ? 2.0 : 0.0);
  }
  return s;
}

class GpuSelect : public testing::TestWithParam<Case> {};

TEST_P(GpuSelect, MatchesReference) {
  const Case& c = GetParam();
  const uint64_t seed = 0x5e1ec7000ULL + static_cast<uint64_t>(c.budget) * 131u + static_cast<uint64_t>(c.visible) +
                        static_cast<uint64_t>(c.heads * 7 + c.dim) * 1000003u;
  SCOPED_TRACE(testing::Message() << "seed " << seed << ", case " << case_name(c));
  const Scenario s = make_scenario(c, seed);
  const SelectLayout l = gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req,
                                              s.visible, s.table);
  const GpuResult g = select_test::run_gpu(s, l);
  const RefResult ref = select_test::run_reference(s);
  for (int64_t t = 0; t < s.rows(); ++t) {
    select_test::check_row(s, ref, g, l, t, c.keys == Keys::kTies);
    if (HasFatalFailure()) return;
  }
}

std::vector<Case> sweep_cases() {
  struct Combo { int heads, dim; IndexerDtype dtype; };
  const Combo combos[] = {{1, 32, IndexerDtype::kBf16}, {4, 128, IndexerDtype::kBf16},
                          {1, 128, IndexerDtype::kFp8}, {4, 32, IndexerDtype::kFp8}};
  std::vector<Case> out;
  for (int kb : {1, 4, 512, 2048}) {
    std::vector<int> vs = {0, 1, kb - 1, kb, kb + 1, 3000, 40000};
    std::sort(vs.begin(), vs.end());
    vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
    for (int v : vs)
      for (const Combo& m : combos) {
        // 40000 blocks only at d_I = 32 (the d_I = 128 path is covered at 3000
        // and by the tie cases at 40000): keeps the host-side reference short.
        if (v == 40000 && m.dim == 128) continue;
        out.push_back({kb, v, m.heads, m.dim, m.dtype, Fp8Flavor::kE4m3fn, Keys::kRandom});
      }
  }
  return out;
}

std::vector<Case> special_cases() {
  const auto bf16 = IndexerDtype::kBf16;
  const auto fp8 = IndexerDtype::kFp8;
  const auto fn = Fp8Flavor::kE4m3fn;
  return {
      // Exact ties: 4 levels over thousands of blocks; the cut falls inside a level.
      {4, 3000, 4, 128, bf16, fn, Keys::kTies},
      {512, 3000, 1, 32, bf16, fn, Keys::kTies},
      {2048, 2100, 4, 32, fp8, fn, Keys::kTies},
      {2048, 40000, 4, 128, bf16, fn, Keys::kTies},
      {2048, 40000, 1, 128, fp8, fn, Keys::kTies},
      // NaN blocks rank first, in id order; more NaNs than K_B at K_B = 4.
      {4, 1000, 4, 128, bf16, fn, Keys::kNan},
      {512, 1000, 1, 32, bf16, fn, Keys::kNan},
      {512, 3000, 4, 32, fp8, fn, Keys::kNan},
      {4, 1000, 4, 32, fp8, Fp8Flavor::kE4m3fnuz, Keys::kNan},
      // The other fp8 flavours on random keys.
      {512, 3000, 4, 128, fp8, Fp8Flavor::kE4m3fnuz, Keys::kRandom},
      {2048, 3000, 4, 32, fp8, Fp8Flavor::kE4m3fnEagerNan, Keys::kRandom},
      // About ten scoring chunks per row, the last one partial: the 16-byte
      // reader with a partial batch of vectors (d_I = 48: 6 bf16 vectors), two
      // head groups (H_I = 5) with NaN blocks, the scalar reader (d_I = 24)
      // and exact ties across chunk boundaries.
      {512, 5000, 4, 48, bf16, fn, Keys::kRandom},
      {64, 5000, 5, 64, fp8, Fp8Flavor::kE4m3fnuz, Keys::kNan},
      {512, 5000, 3, 24, fp8, fn, Keys::kRandom},
      {512, 5000, 4, 32, fp8, Fp8Flavor::kE4m3fnEagerNan, Keys::kTies},
      // Key sizes of the staged scorer's other copy loops and shapes: 64
      // vectors per key (more than a wave: a lane's pieces change vector;
      // fewer waves per block on an H200), 3 vectors (fp8 d_I = 48: divides
      // no wave), and 4 KiB keys, too long for any ring (the direct kernel's
      // vector reader).
      {512, 3000, 4, 512, bf16, fn, Keys::kRandom},
      {256, 3000, 2, 48, fp8, fn, Keys::kRandom},
      {64, 3000, 1, 2048, bf16, fn, Keys::kRandom},
      // The NVIDIA tensor-core scorer's general shapes: two head groups of
      // 8 (the second one partial), with NaN blocks; and d_I = 96 (whole
      // 32-dim chunks, fewer than its registers hold).
      {512, 3000, 12, 64, bf16, fn, Keys::kNan},
      {512, 5000, 3, 96, bf16, fn, Keys::kRandom},
      // Long rows whose strided sample misleads the sampled top-k both ways
      // (too few keys above its threshold, too many): the exact fallback.
      {512, 40000, 4, 32, bf16, fn, Keys::kSampleHigh},
      {2048, 40000, 1, 32, fp8, fn, Keys::kSampleLow},
      {512, 40000, 4, 32, bf16, fn, Keys::kSampleLow},
  };
}

std::string param_name(const testing::TestParamInfo<Case>& info) { return case_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Sweep, GpuSelect, testing::ValuesIn(sweep_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Special, GpuSelect, testing::ValuesIn(special_cases()), param_name);

// A cache pointer off 16-byte alignment takes the scalar key reader, which
// must give the aligned run's bits (ids, scores and every visible score):
// this also pins the scoring kernel's fp8 table to decode_code.
TEST(GpuSelectMisaligned, MatchesAlignedCache) {
  const auto fn = Fp8Flavor::kE4m3fn;
  for (const Case& c : {Case{512, 3000, 4, 128, IndexerDtype::kBf16, fn, Keys::kRandom},
                        Case{64, 700, 4, 32, IndexerDtype::kFp8, fn, Keys::kNan},
                        Case{512, 3000, 4, 128, IndexerDtype::kFp8, Fp8Flavor::kE4m3fnuz, Keys::kRandom},
                        Case{256, 3000, 2, 48, IndexerDtype::kFp8, fn, Keys::kRandom},  // 3-vector keys
                        Case{4, 300, 2, 64, IndexerDtype::kBf16, fn, Keys::kRandom}}) {  // fused kernel
    SCOPED_TRACE(case_name(c));
    const Scenario s = make_scenario(c, 0x5e1ec7a11ULL);
    const SelectLayout l = gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req,
                                                s.visible, s.table);
    const GpuResult aligned = select_test::run_gpu(s, l, gpu::SelectPath::kDecode, 0);
    const GpuResult shifted = select_test::run_gpu(s, l, gpu::SelectPath::kDecode, 1);
    const auto same = [](float a, float b) {
      return select_test::bits_of(a) == select_test::bits_of(b) || (std::isnan(a) && std::isnan(b));
    };
    ASSERT_EQ(aligned.ids, shifted.ids);
    for (size_t i = 0; i < aligned.scores.size(); ++i)
      ASSERT_TRUE(same(aligned.scores[i], shifted.scores[i])) << "block_scores element " << i;
    for (int64_t t = 0; t < s.rows(); ++t)
      for (int32_t b = 0; b < s.visible[t]; ++b) {
        const size_t at = static_cast<size_t>(t * l.score_stride + b);
        ASSERT_TRUE(same(aligned.scratch[at], shifted.scratch[at])) << "row " << t << " block " << b;
      }
  }
}

// The row histograms (select.hpp): the top-k must give the same bits
// whatever they hold, and leave them zero where it read them. Zeroed (the
// contract) gives the histogram path; poison fails its count check; a
// histogram with everything in the zero bin predicts its gather right at
// small V and leads the passes astray (the check after the passes); one
// with the K-th key's bin moved one bin down, from the first run's scores,
// predicts the gather and the passes' start alike and is wrong only in the
// bin the passes start from.
TEST(GpuSelectRowHist, AnyHistogramGivesTheSameBits) {
  const auto fn = Fp8Flavor::kE4m3fn;
  for (const Case& c : {Case{512, 40000, 4, 32, IndexerDtype::kBf16, fn, Keys::kRandom},
                        Case{64, 1500, 4, 128, IndexerDtype::kBf16, fn, Keys::kNan},
                        Case{512, 3000, 4, 128, IndexerDtype::kFp8, fn, Keys::kRandom}}) {
    SCOPED_TRACE(case_name(c));
    const Scenario s = make_scenario(c, 0x5e1ec7b1aULL);
    const SelectLayout l = gpu::validate_select(s.p, s.codes, s.num_pages, s.rows_per_page, s.token_to_req,
                                                s.visible, s.table);
    ASSERT_TRUE(gpu::select_has_row_hist(l));
    const GpuResult zeroed = select_test::run_gpu(s, l, gpu::SelectPath::kDecode);
    const RefResult ref = select_test::run_reference(s);
    for (int64_t t = 0; t < s.rows(); ++t) {
      select_test::check_row(s, ref, zeroed, l, t, false);
      if (HasFatalFailure()) return;
    }
    const std::vector<uint32_t> zeros(static_cast<size_t>(s.rows()) * gpu::kSelectRowHistBins, 0u);
    ASSERT_EQ(select_test::row_hist_of(zeroed, l), zeros) << "the histograms are not zero after the launch";

    // The first run's histograms, rebuilt on the host from its scores.
    std::vector<uint32_t> real = zeros;
    for (int64_t t = 0; t < s.rows(); ++t)
      for (int32_t b = 0; b < s.visible[t]; ++b)
        ++real[static_cast<size_t>(t) * gpu::kSelectRowHistBins +
               gpu::select_detail::score_bin(zeroed.scratch[t * l.score_stride + b])];
    std::vector<uint32_t> poisoned(zeros.size(), gpu::kPoisonId);
    std::vector<uint32_t> zero_bin = zeros, moved = real;
    const uint32_t zero_code_bin = gpu::select_detail::score_bin(0.0f);
    for (int64_t t = 0; t < s.rows(); ++t) {
      uint32_t* row = moved.data() + t * gpu::kSelectRowHistBins;
      zero_bin[t * gpu::kSelectRowHistBins + zero_code_bin] = static_cast<uint32_t>(s.visible[t]);
      // The K-th key's bin (counting down from the top), moved one bin down.
      const uint32_t k = static_cast<uint32_t>(std::min(s.visible[t], s.p.blocks_budget));
      uint32_t above = 0;
      for (int bin = gpu::kSelectRowHistBins - 1; bin > 0 && k > 0; --bin) {
        if (above + row[bin] >= k) {
          row[bin - 1] += row[bin];
          row[bin] = 0;
          break;
        }
        above += row[bin];
      }
    }
    for (const auto& [name, hist] : {std::pair{"poisoned", &poisoned}, std::pair{"all in the zero bin", &zero_bin},
                                     std::pair{"the K-th key's bin moved down", &moved}}) {
      SCOPED_TRACE(name);
      const GpuResult g = select_test::run_gpu(s, l, gpu::SelectPath::kDecode, 0, hist);
      ASSERT_EQ(g.ids, zeroed.ids);
      for (size_t i = 0; i < g.scores.size(); ++i)
        ASSERT_EQ(select_test::bits_of(g.scores[i]), select_test::bits_of(zeroed.scores[i])) << "block_scores " << i;
#if defined(QSA_GPU_CUDA)
      // Only the tensor-core scorer (bf16 on NVIDIA) counts, and only its top-k reads and zeroes.
      if (c.dtype == IndexerDtype::kBf16) {
        ASSERT_EQ(select_test::row_hist_of(g, l), zeros) << "the histograms are not zero after the launch";
        continue;
      }
#endif
      ASSERT_EQ(select_test::row_hist_of(g, l), *hist) << "a launch that does not count touched the histograms";
    }
  }
}

// ---- element decoders and the sort key (host side of select_codes.hpp) ----

bool same_decoded(float got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return static_cast<double>(got) == want && std::signbit(got) == std::signbit(want);
}

TEST(GpuSelectCodes, Bf16DecodesEveryCode) {
  for (uint32_t c = 0; c < 0x10000u; ++c)
    ASSERT_TRUE(same_decoded(gpu::select_detail::decode_code<gpu::select_detail::CodeKind::kBf16>(c),
                             bf16_value(static_cast<uint16_t>(c))))
        << "bf16 code 0x" << std::hex << c;
}

TEST(GpuSelectCodes, Fp8DecodesEveryCode) {
  using gpu::select_detail::CodeKind;
  const auto fp8_fn_to_float = [](uint32_t c) { return gpu::select_detail::decode_code<CodeKind::kFp8Fn>(c); };
  const auto fp8_fnuz_to_float = [](uint32_t c) { return gpu::select_detail::decode_code<CodeKind::kFp8Fnuz>(c); };
  for (uint32_t c = 0; c < 0x100u; ++c) {
    const auto code = static_cast<uint8_t>(c);
    ASSERT_TRUE(same_decoded(fp8_fn_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fn))) << "e4m3fn 0x" << std::hex << c;
    ASSERT_TRUE(same_decoded(fp8_fn_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fnEagerNan)))
        << "e4m3fn (eager NaN) 0x" << std::hex << c;
    ASSERT_TRUE(same_decoded(fp8_fnuz_to_float(c), fp8_decode(code, Fp8Flavor::kE4m3fnuz)))
        << "e4m3fnuz 0x" << std::hex << c;
  }
}

TEST(GpuSelectCodes, ReluKeepsNan) {
  using gpu::select_detail::relu_keep_nan;
  EXPECT_TRUE(std::isnan(relu_keep_nan(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(relu_keep_nan(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(relu_keep_nan(-2.5f), 0.0f);
  EXPECT_FALSE(std::signbit(relu_keep_nan(-0.0f)));
  EXPECT_EQ(relu_keep_nan(3.0f), 3.0f);
}

// The decode path's packed decoders (16-byte key reads) equal decode_code
// bit for bit, for every code at every position of a word.
TEST(GpuSelectCodes, PackedDecodersMatchScalar) {
  using gpu::select_detail::CodeKind;
  using gpu::select_detail::decode_code;
  using gpu::select_detail::decode_packed;
  using select_test::bits_of;
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    const uint32_t want = bits_of(decode_code<CodeKind::kBf16>(c));
    ASSERT_EQ(bits_of(decode_packed<CodeKind::kBf16>(c | 0xABCD0000u, 0)), want) << "bf16 low 0x" << std::hex << c;
    ASSERT_EQ(bits_of(decode_packed<CodeKind::kBf16>((c << 16) | 0x1234u, 1)), want) << "bf16 high 0x" << std::hex << c;
  }
  for (uint32_t c = 0; c < 0x100u; ++c)
    for (int e = 0; e < 4; ++e) {
      const uint32_t word = (0x5A3C81FFu & ~(0xFFu << (8 * e))) | (c << (8 * e));
      ASSERT_EQ(bits_of(decode_packed<CodeKind::kFp8Fn>(word, e)), bits_of(decode_code<CodeKind::kFp8Fn>(c)))
          << "e4m3fn 0x" << std::hex << c << " at byte " << e;
      ASSERT_EQ(bits_of(decode_packed<CodeKind::kFp8Fnuz>(word, e)), bits_of(decode_code<CodeKind::kFp8Fnuz>(c)))
          << "e4m3fnuz 0x" << std::hex << c << " at byte " << e;
    }
}

// The scores the pairwise code tests compare: NaNs of both signs,
// infinities, -0 and +0, denormals, the extremes, neighbours, then `normals`
// draws of the stream `name`.
std::vector<float> scores_to_compare(const char* name, uint64_t normals) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1.0f, -1.0f, 1e-42f, -1e-42f, 2e-42f,
                               std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(), 0.5f,
                               0.50000006f, -0.50000006f};
  const CounterRng rng(0x5e1ec7ULL, name);
  for (uint64_t i = 0; i < normals; ++i) scores.push_back(static_cast<float>(rng.normal(i)));
  return scores;
}

// Key order (larger = earlier) must be block_precedes on every pair of
// special and ordinary scores and ids, -0 == +0 and all NaNs equal included.
TEST(GpuSelectCodes, KeyOrderIsCanonical) {
  const std::vector<float> scores = scores_to_compare("select.key", 40);
  const uint32_t ids[] = {0u, 1u, 7u, 40000u, 0x7FFFFFFEu};
  for (float a : scores)
    for (uint32_t ia : ids)
      for (float b : scores)
        for (uint32_t ib : ids) {
          if (ia == ib) continue;
          const bool key_first = gpu::select_detail::select_key(a, ia) > gpu::select_detail::select_key(b, ib);
          ASSERT_EQ(key_first, block_precedes(a, static_cast<int32_t>(ia), b, static_cast<int32_t>(ib)))
              << a << "#" << ia << " vs " << b << "#" << ib;
        }
  for (uint32_t id : ids) EXPECT_EQ(gpu::select_detail::select_key_id(gpu::select_detail::select_key(1.0f, id)), id);
}

// The gather's float compare (ScoreAtLeast) must agree with the orderable
// codes on every pair of special and ordinary scores: NaNs of both signs,
// -0 and +0, denormals, infinities, neighbours.
TEST(GpuSelectCodes, ScoreAtLeastMatchesOrderableCodes) {
  using gpu::select_detail::orderable_score_bits;
  const std::vector<float> scores = scores_to_compare("select.at_least", 60);
  for (float x : scores) {
    const uint32_t code = orderable_score_bits(x);
    const gpu::select_detail::ScoreAtLeast at_least(code);
    for (float s : scores)
      ASSERT_EQ(at_least(s), orderable_score_bits(s) >= code) << s << " against the code of " << x;
  }
}

// A histogram bin's floor code: ScoreAtLeast of it lets a score through
// exactly when the score's code falls in that bin or above, for every bin
// (those past +inf's hold only NaN's code) and every special score.
TEST(GpuSelectCodes, BinFloorCodeMatchesTheBins) {
  using gpu::select_detail::score_bin;
  const std::vector<float> scores = scores_to_compare("select.bin_floor", 200);
  for (uint32_t bin = 0; bin < static_cast<uint32_t>(gpu::kSelectRowHistBins); ++bin) {
    const gpu::select_detail::ScoreAtLeast at_least(gpu::select_detail::bin_floor_code(bin));
    for (float s : scores)
      ASSERT_EQ(at_least(s), score_bin(s) >= bin) << s << " against bin " << bin;
  }
}

// ---- host validation ------------------------------------------------------

struct ValidInput {
  SelectParams p;
  IndexerCodes codes;
  int64_t num_pages = 6;
  int rows_per_page = 4;
  std::vector<int32_t> token_to_req = {0, 0, 1, -1};
  std::vector<int32_t> visible = {8, 9, 4, 0};
  TensorI32 table = TensorI32({2, 4}, -1);
  ValidInput() {
    p.heads = 2;
    p.dim = 32;
    p.blocks_budget = 4;
    table.at(0, 0) = 5;
    table.at(0, 1) = 0;
    table.at(0, 2) = 3;  // blocks 8..11 of request 0
    table.at(1, 0) = 1;
  }
  SelectLayout validate() const {
    return gpu::validate_select(p, codes, num_pages, rows_per_page, token_to_req, visible, table);
  }
};

std::string validate_error(const ValidInput& in) { return test::input_error_message([&] { in.validate(); }); }

TEST(GpuSelectValidate, AcceptsValidInputAndSizesTheScratch) {
  const SelectLayout l = ValidInput().validate();
  EXPECT_EQ(l.rows, 4);
  EXPECT_EQ(l.num_requests, 2);
  EXPECT_EQ(l.max_pages, 4);
  EXPECT_EQ(l.max_visible, 9);
  EXPECT_EQ(l.score_stride, 9);
  // 36 scores, then (from a multiple of 4 floats) 4 row histograms.
  EXPECT_EQ(gpu::select_row_hist_offset(l), 36u);
  EXPECT_EQ(gpu::select_scratch_floats(l), 36u + 4u * gpu::kSelectRowHistBins);
  SelectLayout odd = l;
  odd.score_stride = 10;  // 40 floats of scores
  odd.rows = 3;           // 30
  EXPECT_EQ(gpu::select_row_hist_offset(odd), 32u);
  EXPECT_EQ(gpu::select_scratch_floats(odd), 32u + 3u * gpu::kSelectRowHistBins);
  SelectLayout many = l;  // beyond kSelectRowHistMaxRows rows: no histograms
  many.rows = gpu::kSelectRowHistMaxRows + 1;
  EXPECT_FALSE(gpu::select_has_row_hist(many));
  EXPECT_EQ(gpu::select_scratch_floats(many), static_cast<size_t>(many.rows) * 9u);
}

TEST(GpuSelectValidate, RejectsBadRows) {
  ValidInput in;
  in.token_to_req[1] = 2;
  EXPECT_NE(validate_error(in).find("token_to_req[1] = 2"), std::string::npos);
  in = ValidInput();
  in.token_to_req[0] = -2;
  EXPECT_NE(validate_error(in).find("token_to_req[0] = -2"), std::string::npos);
  in = ValidInput();
  in.visible[2] = -1;
  EXPECT_NE(validate_error(in).find("visible_blocks[2] = -1"), std::string::npos);
  in = ValidInput();
  in.visible[3] = 1;
  EXPECT_NE(validate_error(in).find("padding row 3"), std::string::npos);
  in = ValidInput();
  in.visible.pop_back();
  EXPECT_NE(validate_error(in).find("visible_blocks has 3 entries"), std::string::npos);
}

TEST(GpuSelectValidate, RejectsBadTables) {
  ValidInput in;
  in.table.at(1, 3) = 6;  // an unused column, still checked
  EXPECT_NE(validate_error(in).find("block_table_c[1, 3] = 6"), std::string::npos);
  in = ValidInput();
  in.table.at(0, 3) = -2;
  EXPECT_NE(validate_error(in).find("block_table_c[0, 3] = -2"), std::string::npos);
  // A visible block on an unmapped page, as gather_compressed_keys rejects it.
  in = ValidInput();
  in.table.at(0, 1) = -1;
  EXPECT_NE(validate_error(in).find("its page 1 is unmapped"), std::string::npos);
  // More visible blocks than the table has pages for.
  in = ValidInput();
  in.visible[0] = 17;
  EXPECT_NE(validate_error(in).find("block_table_c has 4 columns"), std::string::npos);
  in = ValidInput();
  in.table = TensorI32({8}, 0);
  EXPECT_NE(validate_error(in).find("expected [R, max_pages]"), std::string::npos);
}

TEST(GpuSelectValidate, RejectsParamsBeyondTheKernel) {
  ValidInput in;
  in.p.blocks_budget = gpu::kSelectMaxBlocksBudget + 1;
  EXPECT_THROW(in.validate(), ConfigError);
  in = ValidInput();
  in.p.blocks_budget = 0;
  EXPECT_THROW(in.validate(), ConfigError);
  in = ValidInput();
  in.p.heads = 64;
  in.p.dim = 128;  // 8192 query values > kSelectMaxQueryValues
  EXPECT_THROW(in.validate(), ConfigError);
}

TEST(GpuSelectValidate, LauncherRejectsInconsistentLayouts) {
  const ValidInput in;
  SelectLayout l = in.validate();
  l.score_stride = l.max_visible - 1;
  EXPECT_THROW(gpu::launch_select(in.p, in.codes, l, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, hipStream_t{}),
               InputError);
  l = in.validate();
  l.num_pages = 0;  // visible blocks, no cache rows: nothing a scorer may read
  EXPECT_THROW(gpu::launch_select(in.p, in.codes, l, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, hipStream_t{}),
               InputError);
  l = in.validate();  // consistent, but the pointers are missing
  EXPECT_THROW(gpu::launch_select(in.p, in.codes, l, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                  nullptr, hipStream_t{}),
               InputError);
}

}  // namespace
}  // namespace qsa
