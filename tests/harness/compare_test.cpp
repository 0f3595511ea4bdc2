// The comparator on floating and integer tensors: zero metrics for identical
// inputs, the worst element's coordinates, NaN/Inf mask rules, the global
// rel-L2 bound, bf16 ULP buckets at known neighbours, padding rows, shape
// errors, and bit-identical results for any thread count.
#include "harness/compare/compare.hpp"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>

#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0xc0ffee17ULL;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<std::string> kDims = {"row", "head", "dim"};

TensorD random_tensor(const Shape& shape, const char* name) { return test::random_normal(shape, kSeed, name); }

Tolerance test_tolerance() {
  Tolerance t;
  t.abs = tol::kCompareTestAbs;
  t.rel = tol::kCompareTestRel;
  t.rel_l2 = -1.0;  // no global bound unless a test sets one
  t.why = "unit test";
  return t;
}

// Moves element `i` by `factor` times its allowed deviation.
void perturb(TensorD& t, int64_t i, const Tolerance& tol, double factor) {
  t.at(i) += factor * (tol.abs + tol.rel * std::fabs(t.at(i)));
}

TEST(CompareTensors, IdenticalPassWithZeroMetrics) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({5, 3, 8}, "identical");
  const TensorDiff d = compare_tensors("q", e, e, Tolerance{}, kDims);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.count, e.numel());
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_EQ(d.nonfinite_mismatches, 0);
  EXPECT_EQ(d.rel_l2, 0.0);
  EXPECT_TRUE(d.worst_abs.coords.empty());
  EXPECT_TRUE(d.worst_rel.coords.empty());
  EXPECT_EQ(d.ulp_hist[0], e.numel());
  EXPECT_EQ(d.dims, kDims);
}

TEST(CompareTensors, SinglePerturbedElementReportsItsCoordinates) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({4, 2, 8}, "perturbed");
  TensorD a = e;
  const Tolerance tol = test_tolerance();
  const int64_t flat = (1 * 2 + 0) * 8 + 3;  // [row=1, head=0, dim=3]
  perturb(a, flat, tol, tol::kCompareOutsideFactor);
  const TensorDiff d = compare_tensors("q", e, a, tol, kDims);
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.worst_abs.coords, (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(d.worst_rel.coords, (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(format_coords(d.worst_abs.coords, d.dims), "[row=1, head=0, dim=3]");
  EXPECT_EQ(d.worst_abs.expected, e.at(flat));
  EXPECT_EQ(d.worst_abs.actual, a.at(flat));
  EXPECT_EQ(d.worst_abs.abs_err, std::fabs(a.at(flat) - e.at(flat)));
}

TEST(CompareTensors, PerturbationInsideTheBoundPasses) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({4, 2, 8}, "inside");
  TensorD a = e;
  const Tolerance tol = test_tolerance();
  for (int64_t i = 0; i < a.numel(); i += 5) perturb(a, i, tol, tol::kCompareInsideFactor);
  const TensorDiff d = compare_tensors("k", e, a, tol, kDims);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_GT(d.rel_l2, 0.0);
  EXPECT_FALSE(d.worst_abs.coords.empty());
}

TEST(CompareTensors, MissingAxisNamesBecomeIndexedNames) {
  const TensorD e = random_tensor({2, 3, 4}, "names");
  TensorD a = e;
  a.at(1, 2, 3) += 1.0;
  const TensorDiff d = compare_tensors("v", e, a, Tolerance{}, {"row"});
  EXPECT_EQ(d.dims, (std::vector<std::string>{"row", "d1", "d2"}));
  EXPECT_EQ(format_coords(d.worst_abs.coords, d.dims), "[row=1, d1=2, d2=3]");
}

TEST(CompareTensors, NanMaskDisagreementFailsAndBothNanAgrees) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  TensorD e = random_tensor({3, 4}, "nan");
  TensorD a = e;
  e.at(0, 1) = kNan;
  a.at(0, 1) = kNan;  // both NaN: agree, left out of the metrics
  e.at(1, 0) = kInf;
  a.at(1, 0) = kInf;  // equal infinities agree
  TensorDiff d = compare_tensors("attn", e, a, Tolerance{}, {"row", "col"});
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.nonfinite_mismatches, 0);
  EXPECT_EQ(d.rel_l2, 0.0);
  EXPECT_EQ(d.count, e.numel());

  a.at(2, 3) = kNan;  // one-sided NaN
  a.at(1, 0) = -kInf; // +Inf vs -Inf
  d = compare_tensors("attn", e, a, Tolerance{}, {"row", "col"});
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.nonfinite_mismatches, 2);
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_EQ(d.worst_abs.coords, (std::vector<int64_t>{1, 0}));  // the first disagreement
  EXPECT_TRUE(std::isinf(d.worst_abs.abs_err));

  a.at(1, 0) = kNan;  // NaN vs Inf
  a.at(2, 3) = e.at(2, 3);
  d = compare_tensors("attn", e, a, Tolerance{}, {"row", "col"});
  EXPECT_EQ(d.nonfinite_mismatches, 1);
  EXPECT_FALSE(d.pass);
}

TEST(CompareTensors, RelL2BoundIsRespected) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({6, 16}, "l2");
  TensorD a = e;
  // Every element moves by delta relative: inside the element bound, and the
  // relative L2 error is delta.
  const double delta = tol::kCompareInsideFactor * tol::kCompareTestRel;
  for (int64_t i = 0; i < a.numel(); ++i) a.at(i) *= 1.0 + delta;
  Tolerance tol = test_tolerance();
  tol.rel_l2 = tol::kCompareOutsideFactor * delta;
  EXPECT_TRUE(compare_tensors("gate", e, a, tol, {"row", "col"}).pass);
  tol.rel_l2 = tol::kCompareInsideFactor * delta;
  const TensorDiff d = compare_tensors("gate", e, a, tol, {"row", "col"});
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.mismatches, 0);
  EXPECT_GT(d.rel_l2, tol.rel_l2);
  tol.rel_l2 = 0.0;  // zero: exact
  EXPECT_FALSE(compare_tensors("gate", e, a, tol, {"row", "col"}).pass);
  tol.rel_l2 = -1.0;  // negative: no global bound
  EXPECT_TRUE(compare_tensors("gate", e, a, tol, {"row", "col"}).pass);
}

TEST(CompareTensors, ZeroExpectedGivesInfiniteRelativeErrors) {
  const TensorD zeros({2, 3}, 0.0);
  TensorD a = zeros;
  EXPECT_EQ(compare_tensors("out", zeros, a, Tolerance{}, {}).rel_l2, 0.0);
  a.at(1, 1) = tol::kCompareTestAbs;
  const TensorDiff d = compare_tensors("out", zeros, a, Tolerance{}, {});
  EXPECT_TRUE(std::isinf(d.rel_l2));
  EXPECT_TRUE(std::isinf(d.worst_rel.rel_err));
  EXPECT_EQ(d.worst_rel.coords, (std::vector<int64_t>{1, 1}));
}

TEST(CompareTensors, UlpHistogramCountsBf16Steps) {
  const double step = kBf16Eps;  // bf16 spacing in [1, 2)
  const double below = 1.0 - 0.5 * kBf16Eps;  // the bf16 value just below 1
  const double tiny = bf16_value(0x0001);     // smallest subnormal
  const TensorD e(Shape{7}, 1.0);
  TensorD ev = e, a = e;
  a.at(1) = 1.0 + step;      // 1 ulp
  a.at(2) = 1.0 + 2 * step;  // 2 ulps
  a.at(3) = 1.0 + 4 * step;  // bucket 3-4
  a.at(4) = below;           // 1 ulp across the binade
  ev.at(5) = -tiny;
  a.at(5) = tiny;            // across zero: -tiny, 0, +tiny: 2 ulps
  ev.at(6) = -0.0;
  a.at(6) = 0.0;             // +0 and -0 are one value
  const TensorDiff d = compare_tensors("q", ev, a, Tolerance{}, {"i"});
  EXPECT_EQ(d.ulp_hist[0], 2);
  EXPECT_EQ(d.ulp_hist[1], 2);
  EXPECT_EQ(d.ulp_hist[2], 2);
  EXPECT_EQ(d.ulp_hist[3], 1);
  EXPECT_EQ(ulp_bucket_label(2), "2");
  EXPECT_EQ(ulp_bucket_label(3), "3-4");
  EXPECT_EQ(ulp_bucket_label(kUlpBuckets - 1), ">64");
}

TEST(CompareTensors, UlpBucketBoundaries) {
  const std::vector<std::pair<int64_t, int>> cases = {{0, 0},  {1, 1},  {2, 2},  {3, 3},  {4, 3},  {5, 4},
                                                      {8, 4},  {9, 5},  {16, 5}, {17, 6}, {64, 6}, {65, 7}};
  for (const auto& [distance, bucket] : cases) EXPECT_EQ(ulp_bucket(distance), bucket) << distance;
  EXPECT_EQ(bf16_ulp_distance(1.0, 2.0), 128);  // a whole binade of 7-bit mantissas
  EXPECT_EQ(bf16_ulp_distance(-1.0, -1.0 - kBf16Eps), 1);
}

TEST(CompareTensors, RowMaskSkipsPaddingRows) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({4, 2, 8}, "mask");
  TensorD a = e;
  for (int64_t j = 0; j < 16; ++j) a.row(2)[j] = kNan;  // padding row: garbage
  const std::vector<bool> mask = {true, true, false, true};
  const TensorDiff d = compare_tensors("q", e, a, Tolerance{}, kDims, &mask);
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.count, 3 * 16);
  EXPECT_FALSE(compare_tensors("q", e, a, Tolerance{}, kDims).pass);
  const std::vector<bool> short_mask = {true, true};
  EXPECT_THROW(compare_tensors("q", e, a, Tolerance{}, kDims, &short_mask), InputError);
}

TEST(CompareTensors, ShapeMismatchThrowsNamingStageAndShapes) {
  const TensorD e = random_tensor({2, 3}, "shape_e");
  const TensorD a = random_tensor({2, 4}, "shape_a");
  try {
    compare_tensors("gated", e, a, Tolerance{}, {});
    FAIL() << "no InputError";
  } catch (const InputError& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("gated"), std::string::npos) << what;
    EXPECT_NE(what.find("[2, 3]"), std::string::npos) << what;
    EXPECT_NE(what.find("[2, 4]"), std::string::npos) << what;
  }
}

TEST(CompareExact, IntegersMustMatchExactly) {
  TensorI32 e(Shape{3, 4});
  for (int64_t i = 0; i < e.numel(); ++i) e.at(i) = static_cast<int32_t>(i * 7 % 11);
  TensorI32 a = e;
  TensorDiff d = compare_exact("comp_tokens", e, a, {"row", "col"});
  EXPECT_TRUE(d.pass);
  EXPECT_EQ(d.ulp_hist[0], e.numel());
  a.at(2, 1) += 3;
  d = compare_exact("comp_tokens", e, a, {"row", "col"});
  EXPECT_FALSE(d.pass);
  EXPECT_EQ(d.mismatches, 1);
  EXPECT_EQ(d.worst_abs.coords, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(d.ulp_hist[3], 1);  // |a - e| = 3 lands in 3-4
  const std::vector<bool> mask = {true, true, false};
  EXPECT_TRUE(compare_exact("comp_tokens", e, a, {"row", "col"}, &mask).pass);
}

TEST(CompareTensors, BitIdenticalForAnyThreadCount) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD e = random_tensor({96, 4, 257}, "threads_e");
  TensorD a = e;
  const CounterRng noise(kSeed, "threads_noise");
  for (int64_t i = 0; i < a.numel(); ++i) a.at(i) += tol::kCompareTestRel * noise.normal(static_cast<uint64_t>(i));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TensorDiff one = compare_tensors("out", e, a, test_tolerance(), kDims);
  omp_set_num_threads(4);
  const TensorDiff four = compare_tensors("out", e, a, test_tolerance(), kDims);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.rel_l2, four.rel_l2);
  EXPECT_EQ(one.mismatches, four.mismatches);
  EXPECT_EQ(one.worst_abs.coords, four.worst_abs.coords);
  EXPECT_EQ(one.worst_rel.coords, four.worst_rel.coords);
  EXPECT_EQ(one.ulp_hist, four.ulp_hist);
}

}  // namespace
}  // namespace qsa
