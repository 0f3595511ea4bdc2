// Sigmoid gate O = A ⊙ sigmoid(gate) and its two bf16 rounding knobs.
#include "reference/gate.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x6a7e5eedULL;
const Shape kShape = {3, 4, 32};  // [T, H, D] of the tiny preset

TensorD random_tensor(const char* name, double sigma) { return test::random_normal(kShape, kSeed, name, sigma); }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(ApplyGate, ZeroGateHalvesTheAttention) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD attn = random_tensor("gate.attn", 1.0);
  const TensorD gate(kShape, 0.0);  // sigmoid(0) = 1/2 exactly
  TensorD out;
  apply_gate(GateParams{}, attn, gate, out);
  ASSERT_EQ(out.shape, kShape);
  for (int64_t i = 0; i < attn.numel(); ++i) EXPECT_EQ(out.data[i], attn.data[i] / 2) << "element " << i;
}

TEST(ApplyGate, MatchesTheSigmoidFormula) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD attn = random_tensor("gate.attn", 1.0);
  const TensorD gate = random_tensor("gate.gate", 3.0);
  TensorD out;
  apply_gate(GateParams{}, attn, gate, out);
  for (int64_t i = 0; i < attn.numel(); ++i) {
    const double want = attn.data[i] * sigmoid(gate.data[i]);
    EXPECT_NEAR(out.data[i], want, tol::kGateFp64Rel * std::fabs(want)) << "element " << i;
  }
}

TEST(ApplyGate, RoundSigmoidUsesABf16Sigmoid) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD ones(kShape, 1.0);  // A = 1 exposes the sigmoid itself
  const TensorD gate = random_tensor("gate.gate", 3.0);
  TensorD out;
  apply_gate(GateParams{/*round_sigmoid=*/true, /*round_output=*/false}, ones, gate, out);
  bool changed = false;
  for (int64_t i = 0; i < gate.numel(); ++i) {
    const double exact = sigmoid(gate.data[i]);
    EXPECT_EQ(out.data[i], round_bf16(out.data[i])) << "sigmoid " << i << " is not a bf16 value";
    EXPECT_LE(std::fabs(out.data[i] - exact), tol::kGateBf16SigmoidRel * exact) << "element " << i;
    changed |= out.data[i] != exact;
  }
  EXPECT_TRUE(changed);
}

TEST(ApplyGate, RoundOutputGivesBf16Values) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const TensorD attn = random_tensor("gate.attn", 1.0);
  const TensorD gate = random_tensor("gate.gate", 3.0);
  TensorD plain, rounded;
  apply_gate(GateParams{}, attn, gate, plain);
  apply_gate(GateParams{false, true}, attn, gate, rounded);
  for (int64_t i = 0; i < attn.numel(); ++i)
    EXPECT_EQ(rounded.data[i], round_bf16(plain.data[i])) << "element " << i;
}

TEST(ApplyGate, RejectsMismatchedShapes) {
  const TensorD attn = random_tensor("gate.attn", 1.0);
  const TensorD gate({3, 4, 31}, 0.5);
  TensorD out;
  EXPECT_THROW(apply_gate(GateParams{}, attn, gate, out), InputError);
}

}  // namespace
}  // namespace qsa
