// The one table of test tolerances. Each bound carries the formula that
// justifies it; tests name an entry, never a literal.
#pragma once

#include <cmath>

#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"

namespace qsa::tol {

// ---- codecs -------------------------------------------------------------
// (bounds for bf16/fp16/fp8/Octave round trips)

// The bf16/fp16/fp8 codecs are checked bit-exactly (they are correctly rounded
// by definition), so only Octave, the WHT and the RNG need bounds.
inline constexpr double kCodecFp64Eps = 0x1p-52;  // fp64 machine epsilon (ulp of 1.0)

// Octave, aggregate relative L2 error (sqrt(sum |x - x'|^2 / sum |x|^2) over
// every block of one bit width in a batch of N(0,1) tokens). The Lloyd-Max
// centroid condition gives E[u c] = E[c^2] = 1 - D, so the dot-preserving
// scale s = |y|^2 / (y . c) ~ 1 / (1 - D) leaves a relative MSE of D / (1 - D):
// D = 0.0345 (3 bits) -> rel-L2 0.189, D = 0.0095 (4 bits) -> 0.098 (measured:
// 0.184-0.188 and 0.095-0.096 over 10^5 blocks). With >= 4096 values per
// aggregate its sampling spread is ~1%, so ~12-15% margin only fails on a real
// regression (a wrong codebook entry or a mis-scaled block moves it by more).
inline constexpr double kOctaveRelL2Bits3 = 0.21;
inline constexpr double kOctaveRelL2Bits4 = 0.11;

// Octave, any single block: a gross-error catch (wrong signs, wrong block
// offsets, swapped scales give rel-L2 ~1 or more). Heavy tails from values past
// the outermost codebook entry make single blocks noisy: over 10^5 N(0,1)
// blocks of 64 dims the worst seen was 0.39 (3 bits) and 0.28 (4 bits), p99.99
// 0.34 and 0.22; these bounds sit above that.
inline constexpr double kOctaveBlockRelL2Bits3 = 0.5;
inline constexpr double kOctaveBlockRelL2Bits4 = 0.35;

// Octave scale property x . x' = |x|^2 per block: only the fp16 rounding of s
// (relative <= 2^-11 = kFp16Eps / 2) breaks it, plus fp64 rounding in the two
// WHTs and the dot products (~log2(n) + n ulps, far below 2^10 ulps).
inline constexpr double kOctaveDotRel = 0.5 * kFp16Eps + 1024.0 * kCodecFp64Eps;

// Walsh-Hadamard in fp64, relative L2: each of log2(n) butterfly stages and the
// final scaling adds at most ~1 ulp per element (normwise); 4 ulps per stage
// for n <= 1024 leaves margin.
inline constexpr double kWhtRelL2 = 4.0 * 11.0 * kCodecFp64Eps;

// RNG moments over n samples, as k standard errors (k = 5: a fixed-seed test
// that a correct generator fails with probability ~6e-7).
//  mean of U[0,1): se = sqrt(1/12 / n); mean of N(0,1): se = 1/sqrt(n);
//  variance of N(0,1): se = sqrt(2 / n) (fourth moment 3).
inline constexpr double kRngSigmas = 5.0;
inline double rng_uniform_mean_tol(double n) { return kRngSigmas * std::sqrt(1.0 / 12.0 / n); }
inline double rng_normal_mean_tol(double n) { return kRngSigmas / std::sqrt(n); }
inline double rng_normal_var_tol(double n) { return kRngSigmas * std::sqrt(2.0 / n); }

// ---- reference stages ---------------------------------------------------

// Block scores (select), fp64 against a plainly ordered fp64 formula. Each
// order of a d-term dot is within gamma_d * sum|q_i k_i| of the exact value
// (gamma_n ~ n * u, u = 2^-53); ReLU is 1-Lipschitz, the H_I-term head sum
// adds gamma_H and the scale one u. Two orders therefore differ by at most
// 2 * (d + H_I + 1) * u * s * sum_h sum_i |q_hi k_i|; one extra u per term
// absorbs the second-order parts of gamma_n.
inline double select_score_tol(double scaled_abs_sum, int dim, int heads) {
  return 2.0 * (dim + heads + 2) * 0x1p-53 * scaled_abs_sum;
}

// -- projection, Gemma RMSNorm, RoPE (tests/reference/{projection,rms_norm,rope}_test.cpp) --
// u = 2^-53 is the fp64 unit roundoff.

// An n-term fp64 dot product in two summation orders (Eigen's blocked GEMM vs
// a naive loop): each lies within gamma_n = n*u/(1 - n*u) of the exact sum,
// relative to sum_k |x_k w_k|, so they differ by at most 2*gamma_n; (n + 1)
// absorbs the 1/(1 - n*u) factor for n*u << 1.
inline double projection_dot_tol(int n, double abs_sum) {
  return 2.0 * (n + 1) * 0x1p-53 * abs_sum;
}

// Gemma RMSNorm per element, relative, against the same formula evaluated in
// another order: the n-term sum of squares (n*u), mean, +eps, sqrt (half of
// the relative error under it, plus u), division, (1 + w) and product
// (a few u): <= (n + 8)*u.
inline double rms_norm_rel_tol(int n) { return (n + 8) * 0x1p-53; }
// |mean(y^2) - 1| for a unit-gain row (w = 0, eps = 0): 2 * rel(y) for the
// squares plus n*u for their sum, <= 3 * rms_norm_rel_tol(n).
inline double rms_norm_unit_mean_sq_tol(int n) { return 3.0 * rms_norm_rel_tol(n); }

// RoPE in exact mode against the closed form, per rotated value relative to
// the pair's norm: the angle pos * theta^(-2j/R) carries <= 2 ulps (pow, then
// the product), so cos/sin err <= 2u*|angle| + u (libm within 1 ulp); the two
// products and the sum add 2u; both sides err: 2 * (2|angle| + 3)u <= 8u(1 + |angle|).
inline double rope_closed_form_tol(double angle) { return 8.0 * 0x1p-53 * (1.0 + angle); }

// RoPE norm preservation in exact mode, relative on |x|^2 over n rotated dims:
// c^2 + s^2 = 1 within ~4u, each rotated value within ~3u of its pair norm,
// and two n-term sums of squares (n*u each): <= (2n + 16)u.
inline double rope_norm_rel_tol(int n) { return (2 * n + 16) * 0x1p-53; }

// RoPE relative-position property q(m)·k(n) = q(m+d)·k(n+d), relative to
// |q||k|: every cos/sin err <= 2u*max_angle + u (see above) on either vector,
// both dot products err n*u: (4 * max_angle + 8 + 2n)u.
inline double rope_relative_dot_tol(int n, double max_angle) {
  return (4.0 * max_angle + 8.0 + 2.0 * n) * 0x1p-53;
}

// fp32 inv_freq = f32(1 / f32(theta^(2j/R))): two fp32 roundings of 2^-24
// each; the fp64 pow's own error (~2^-52) sits far inside the 2^-40 slack.
// The bf16 variant adds one bf16 rounding (half its eps).
inline constexpr double kRopeFp32InvFreqRel = kFp32Eps + 0x1p-40;
inline constexpr double kRopeBf16InvFreqRel = 0.5 * kBf16Eps + kRopeFp32InvFreqRel;

// fp32 angles vs exact, worst pair, theta = 1e7, R = 64 (spec section 3). At a
// power-of-two position f32(pos) * inv_freq is exact, so only inv_freq's
// rounding shows: <= 262144 * inv_j * 2^-23 (1.1e-2 for pair 2), measured
// 4.5e-3 rad (pair 2). The spec's
// 8.9e-3 / 1.4e-4 are the worst over positions up to 262K / 4K, where the
// product's rounding (half an ulp of a ~1.6e5 angle = 7.8e-3) adds; measured
// 8.85e-3 at 261361 and 1.37e-4 up to 4096. The window [1e-3, 2e-2] sits a
// factor >= 2 from both and fails on exact angles (0) or on a bf16 inv_freq
// (~2^-9 relative, ~1e2 rad); at 4096 the bound is 7x the worst seen.
inline constexpr double kRopeFp32AngleErrMin262k = 1e-3;
inline constexpr double kRopeFp32AngleErrMax262k = 2e-2;
inline constexpr double kRopeFp32AngleErrMax4k = 1e-3;

// hf-eager per-op rounding vs the unrounded rotation, per value, relative to
// |x_a| + |x_b| of its pair: round(x*c) and round(rot*s) err 2^-9 of their
// magnitudes (<= |x_a| + |x_b| together), the rounded sum 2^-9 of itself:
// <= 2^-8 (1 + 2^-9) < kBf16Eps.
inline constexpr double kRopePerOpRel = kBf16Eps;

// -- main KV cache, attention, gate (tests/reference/{kv_cache,attention,gate}_test.cpp) --

// fp8 KV round trip, stored fp8(x / scale) and read back times scale: a normal
// fp8 value is within half its ulp, 2^-4 = kFp8Eps / 2 relative; below the
// normal range the spacing is fixed at 2^-9 (e4m3fn) or 2^-10 (e4m3fnuz), so
// half of the larger, 2^-10, in units of the scale.
inline double fp8_kv_tol(double x, double scale) {
  return 0.5 * kFp8Eps * std::fabs(x) + 0x1p-10 * scale;
}

// Attention in fp64, two evaluation orders (Eigen GEMMs vs naive loops, or the
// ids reversed), per output element relative to max_j |V_j| over the row's
// tokens. A D-term logit dot errs <= D*u*sum|q_d k_d|, and for N(0,1) data
// sum|q_d k_d| * D^-1/2 <= ~10 up to D = 256 (expected 0.64*sqrt(D)), so each
// logit errs <= 2560u; exp passes that on as a relative weight error, the sum
// of n <= 128 weights adds n*u, and the PV sum another n*u relative to
// max|V|: 2*(2560 + 2*128)u ~ 5600u for two orders; 2^13 u (~9.1e-13) covers it.
inline constexpr double kAttentionFp64Rel = 0x1p13 * 0x1p-53;

// bf16 attention probabilities (engine: bf16(exp(s - max)) over an unrounded
// sum; hf-eager: bf16(P)) against unrounded P: every weight moves by at most
// half a bf16 ulp relative (2^-8 = kBf16Eps / 2), so |dA| <= 2^-8 sum_j P_j |V_j|
// <= 2^-8 max_j |V_j|, plus the fp64 evaluation slack above.
inline constexpr double kAttentionBf16PRel = 0.5 * kBf16Eps + kAttentionFp64Rel;

// Gate against the same formula written out: exp (<= 1 ulp in glibc), the
// sum, the division and the product each add <= 1 u per side: 8u.
inline constexpr double kGateFp64Rel = 8.0 * 0x1p-53;

// A bf16-rounded sigmoid is within half a bf16 ulp, relative, of the exact one
// (2^-8 = kBf16Eps / 2), plus the fp64 sigmoid's own few u.
inline constexpr double kGateBf16SigmoidRel = 0.5 * kBf16Eps + kGateFp64Rel;

// -- step driver (tests/reference/step_driver_properties_test.cpp) --
// u = 2^-8 = kBf16Eps / 2 is one bf16 rounding, relative.

// Engine vs exact profile, one indexer block score I = s * sum_h ReLU(q_h . k),
// relative to s * sum_h |q_h| |k| (ReLU is 1-Lipschitz). A worst-case chain
// (every rounding aligned, Cauchy-Schwarz) allows ~17u, as large as typical
// score gaps and so useless for telling near-ties from real flips. The
// roundings are independent, each ~u/sqrt(3) RMS relative: q_I carries 4
// (projection, norm store, bf16 cos/sin, RoPE store; the norm's Jacobian does
// not amplify an RMS error), k_c 5 (raw keys, whose mean over r N(0,1) members
// keeps the RMS relative error on average, the pooled store, norm, cos/sin,
// RoPE). A d-term dot of such errors is ~N(0, sigma) with sigma =
// sqrt(4 + 5) (u / sqrt(3)) |q| |k| / sqrt(d); the bound is 6 sigma (per-score
// failure odds ~1e-9). d_I = 32: 0.92 kBf16Eps; measured worst 0.24 kBf16Eps
// over 40 seeds on tiny.
inline double driver_engine_score_shift_tol(double scaled_norm_products, int dim) {
  const double u_rms = 0.5 * kBf16Eps / std::sqrt(3.0);
  return 6.0 * 3.0 * u_rms / std::sqrt(static_cast<double>(dim)) * scaled_norm_products;
}

// Engine vs exact profile, relative L2 of the layer output over the rows
// whose selected block sets agree (a flipped row attends other tokens). Each
// bf16 store errs ~u / sqrt(3) RMS, independently: V, P (bf16 exp), A, the
// gated product and o_proj add ~5 such errors; q and k carry ~4 each into the
// logits (|S| ~ 1 after the norms, so dS ~ sqrt(8) u / sqrt(3)) and softmax
// passes dS on to A at about unit gain. In quadrature sqrt(5 + 8) u / sqrt(3)
// ~ 1.04 kBf16Eps; measured 0.55-0.91 kBf16Eps per step over 40 seeds on tiny
// with budgets 16 and 64. 2 kBf16Eps leaves a factor 2 over the estimate.
inline constexpr double kDriverEngineVsExactOutRelL2 = 2.0 * kBf16Eps;

// ---- harness: comparator and reports (tests/harness/compare*_test.cpp) ----

// The comparator's own tests use a synthetic element bound of one bf16 ulp
// relative (the size of one storage-point flip) over a 2^-20 floor, and a tie
// band equal to the one spec section 11 measured for bf16 engines (near-ties
// within 1e-2 relative flipped between transformers and its emulation).
inline constexpr double kCompareTestRel = kBf16Eps;
inline constexpr double kCompareTestAbs = 0x1p-20;
inline constexpr double kCompareTestTieTol = 1e-2;

// Perturbations placed relative to a bound: "inside" a factor 2 below it,
// "outside" a factor 16 above it, so a verdict never hinges on the rounding
// of the test's own arithmetic (a few fp64 ulps).
inline constexpr double kCompareInsideFactor = 0.5;
inline constexpr double kCompareOutsideFactor = 16.0;

// Measured relative L2 differences at the layer output that stage tolerances
// must separate (harness/compare/stage_tolerances.hpp): roundings matched
// (hf-eager emulated against transformers in bf16, worst 6e-4) must pass;
// a wrong profile (storage points only against hf-eager, best 3e-2) must fail
// (both spec section 11), and so must the engine profile against the exact
// one (best 0.55 kBf16Eps, see kDriverEngineVsExactOutRelL2).
inline constexpr double kSpecMatchedProfileRelL2 = 6e-4;
inline constexpr double kSpecWrongProfileRelL2 = 3e-2;
inline constexpr double kEngineVsExactOutRelL2Measured = 0.55 * kBf16Eps;

// ---- harness: accuracy sweeps (tests/harness/sweep_*_test.cpp) ----------

// Mass recall of a set holding every token, |Σ_{t<=p} P(t) - 1|: each fp64
// probability exp(s - m) / Σ carries <= ~3 rounding errors (exp, the sum's
// own relative error of <= (n - 1)u, the division) and summing n of them
// adds <= (n - 1)u of the total 1, so |error| <= (2n + 2)u with u = 2^-53;
// (4n + 8)u leaves a factor 2.
inline double sweep_full_mass_tol(double n) { return (4.0 * n + 8.0) * 0x1p-53; }

// Two head-summed masses over the same tokens, summed in different orders
// (per head over tokens, then over heads): each order is within (terms)u of
// the exact sum of nonnegative terms totalling <= `total`, so they differ by
// <= 2·terms·u·total. Used where a policy's mass must not exceed the
// mass-optimal oracle's.
inline double sweep_mass_order_tol(double terms, double total) { return 2.0 * terms * 0x1p-53 * total; }

// ---- GPU kernels against the reference: attention and gate ---------------
// (tests/gpu/sparse_attention_test.cpp; expand is compared bit for bit.)
// u32 = 2^-24 is the fp32 unit roundoff. fp32 sums of n terms are bounded
// statistically: each rounding errs <= u32 of its running sum, independently,
// so the total is a random walk of ~sqrt(n)·u32 relative to the sum of the
// magnitudes; 8 standard deviations (the worst case n·u32 would be looser
// than any real error by ~sqrt(n) and would hide a dropped id in long rows).
inline constexpr double kGpuFp32Unit = 0x1p-24;
inline constexpr double kGpuSigmas = 8.0;
inline double gpu_fp32_sum_rel(double n) { return kGpuSigmas * std::sqrt(n) * kGpuFp32Unit; }

// Sparse attention, fp32 kernel against the fp64 reference with the same
// knobs: absolute bound per element of A of one head, for a row whose n
// attended V rows have max |V| = v_max and whose logits have
// scale·Σ_d |q_d k_d| <= s_abs:
//  - a D-term fp32 logit dot errs <= gpu_fp32_sum_rel(D)·s_abs; softmax turns
//    a logit error δ into a relative weight error δ, in the numerator and
//    again through the denominator: 2δ·v_max;
//  - the n-term sums l = Σ e_j and Σ P_j V_j: gpu_fp32_sum_rel(n) each,
//    relative to Σ P|V| <= v_max;
//  - expf (<= 2 ulp), the division, the merge of splits and the rescale
//    exp(m_old - m_new) applied once per 128-id tile: 16 u32 plus one per tile.
inline double gpu_attention_fp32_tol(double v_max, double s_abs, int dim, double n) {
  return (2.0 * gpu_fp32_sum_rel(dim) * s_abs + 2.0 * gpu_fp32_sum_rel(n) + (16.0 + n / 128.0) * kGpuFp32Unit) *
         v_max;
}

// bf16 P (engine: bf16(exp(s - m)) over an unrounded sum): kernel and
// reference each keep every weight within half a bf16 ulp (2^-8 relative) of
// the unrounded one, but the kernel rounds against its running max and then
// rescales, the reference against the row's global max, so the two weights
// can differ by a whole ulp: |dA| <= 2^-7 Σ P_j|V_j| <= kBf16Eps·v_max.
inline constexpr double kGpuAttentionBf16PRel = kBf16Eps;

// bf16-rounded logits (p.round_logits): a rounding of bf16(QK) or of
// bf16(bf16(QK)·scale) can flip between the fp32 and the fp64 dot, moving
// one logit by up to an ulp per rounding, 2·kBf16Eps·|s| in all; each weight
// then moves by a factor exp(2·kBf16Eps·s_max) in numerator and denominator.
// A loose bound: flips are rare (~1e-4 of the logits), so this case is a
// smoke test of the knob, not a sharp check.
inline double gpu_attention_round_logits_tol(double v_max, double s_max) {
  return 2.0 * std::expm1(2.0 * kBf16Eps * s_max) * v_max;
}

// A value stored in bf16 on one or both sides: if the unrounded values are
// within tol, the stored ones are within tol plus half an ulp (2^-8
// relative) of each: tol(1 + 2^-8) + 2^-8(|x| + |y|) <= tol(1 + kBf16Eps) +
// kBf16Eps(1 + kBf16Eps)|ref| (|y| <= |ref| / (1 - 2^-8)).
inline double gpu_bf16_store_tol(double tol, double ref_abs) {
  return tol * (1.0 + kBf16Eps) + kBf16Eps * (1.0 + kBf16Eps) * ref_abs;
}

// Gate epilogue in fp32: expf (<= 2 ulp), 1 + e, the division and the
// product: <= 8 u32 relative to the gated value.
inline constexpr double kGpuGateFp32Rel = 8.0 * kGpuFp32Unit;

// Octave against bf16 KV, mean attention error: 3-bit codes err ~0.19 and
// 4-bit ~0.10 relative per vector (kOctaveRelL2Bits3/4 above), bf16 at most
// 2^-9 ~ 0.002; the ratio is ~50. A factor 10 separates "Octave's codes were
// read" from "the exact copies were read" with margin either way.
inline constexpr double kSweepOctaveOverBf16 = 10.0;

// GPU select: fp32 block score against the fp64 reference. Inputs are bf16/fp8 values, so every
// product q_j k_j is exact in fp32 and only sums round. Two formulas (gpu/select/select.hpp):
//  - fma chains (fp8, and every AMD build): a d-term chain errs <= (d - 1)u sum_j |q_j k_j|
//    (u = 2^-24), ReLU is 1-Lipschitz, the H-term head sum adds (H - 1)u, fp32(s) and the
//    product with it 2u: (d + H + 4)u covers these, second-order terms and the reference's own
//    fp64 error (~(d + H)2^-53);
//  - bf16 m16n8k16 mma chains (NVIDIA): 2 ceil(d / 32) steps, each adding 16 exact products to
//    the accumulator. Modelled as tensor cores are measured to behave (products exact, aligned
//    to the largest of the 17 terms with at least 24 significant bits kept and the rest
//    truncated, the sum truncated to fp32), one step errs < 16 · 2^-23 (the aligned terms) +
//    2^-23 (the result) <= 34u of its terms' magnitude, each at most the running sum of |q_j k_j|:
//    36u per step covers that with room, then (H + 4)u as above.
// The bound is the larger, 36u · 2 ceil(d / 32) >= 2.25 d u. A worst-case bound, not the
// sqrt(n) typical one: it holds for every one of the ~10^6 scores a run checks, and it is also
// the tie band of the end-to-end comparison.
inline double gpu_select_score_tol(double scaled_abs_sum, int dim, int heads) {
  const double mma_steps = 2.0 * ((dim + 31) / 32);
  return (36.0 * mma_steps + heads + 4) * 0x1p-24 * scaled_abs_sum;
}

// GPU projection (tests/gpu/projection_test.cpp), fp32 output against the
// fp64 reference, per element of y = x · w^T over n = in_dim terms with
// abs_sum = Σ_k |x_k w_k|: the inputs are bf16, so every product is exact in
// fp32 (8 x 8 significand bits, normal range) and the kernel's k-ordered fma
// chain rounds only its n - 1 partial sums, each by <= u32 · |partial| <=
// u32 · abs_sum, independently: gpu_fp32_sum_rel(n) · abs_sum. The reference's
// own fp64 order errs <= (n + 1) · 2^-53 · abs_sum (projection_dot_tol / 2).
// With p.round_output (or the bf16 store) wrap it in gpu_bf16_store_tol.
inline double gpu_projection_tol(int n, double abs_sum) {
  return (gpu_fp32_sum_rel(n) + (n + 1) * 0x1p-53) * abs_sum;
}

// GPU prepare (tests/gpu/prepare_test.cpp): norm + RoPE + stores against the
// reference, per element, following each value through the chain with the
// reference's own intermediate values. The kernel reproduces the angles,
// cos/sin, the rotation (fp64), the pooled means (fp64, member order) and
// every rounding to bf16/fp8 (one rounding from fp64) exactly; what differs
// is the fp32 Gemma RMSNorm, and a rounding that lands on the other side of
// a tie because of it.
//
// fp32 RMSNorm relative to the element: the n-term sum of squares errs
// gpu_fp32_sum_rel(n) (positive terms, statistical), halved by the square
// root; / n and + eps (1 u32 each), rsqrtf (<= 2 ulps, CUDA's documented
// bound: 4 u32), the two products x · rsqrt · (1 + w) and 1 + w (1 u32 each) and an
// fp32 input (a pooled mean the exact profile keeps unrounded: 2 u32 through
// x and the rms): 11 u32 in all, rounded up to 12.
inline double gpu_prepare_norm_rel(int n) { return 0.5 * gpu_fp32_sum_rel(n) + 12.0 * kGpuFp32Unit; }

// Unit roundoffs u (half an ulp, relative) of the stores, and fp8's half
// subnormal spacing (2^-9 apart in e4m3fn, 2^-10 in e4m3fnuz).
inline constexpr double kGpuPrepareBf16Unit = 0.5 * kBf16Eps;
inline constexpr double kGpuPrepareFp8Unit = 0.5 * kFp8Eps;
inline constexpr double kGpuPrepareFp8Floor = 0x1p-10;

// Both sides round to a format (unit u, absolute floor f below its normal
// range): values A (reference) and B (GPU) with |A - B| <= d become
// |rnd(A) - rnd(B)| <= (u|A| + f) + d + (u|B| + f) <= d(1 + u) + 2u|A| + 2f,
// and |A| <= (|rnd(A)| + f) / (1 - u) <= (|rnd(A)| + f)(1 + 2u) for u <= 1/2:
// <= (d + 2u|ref| + 4f)(1 + 2u) with ref = rnd(A). This is where one-ulp
// flips at a tie are allowed for.
inline double gpu_prepare_rounded_both(double d, double ref_abs, double u, double floor) {
  return (d + 2.0 * u * ref_abs + 4.0 * floor) * (1.0 + 2.0 * u);
}

// Only the GPU rounds (its outputs are bf16; the exact profile's reference
// is not rounded): |rnd(B) - A| <= d + u|B| <= (d + u|A|)(1 + u), ref = A.
inline double gpu_prepare_rounded_gpu_only(double d, double ref_abs, double u) {
  return (d + u * ref_abs) * (1.0 + u);
}

// cos/sin: the device's fp64 cos/sin may differ from glibc's by an fp64 ulp
// or two; after the fp32 (and bf16) rounding of the engine knobs they agree
// unless that ulp straddles a rounding boundary (~2^-29 per value), and then
// by one fp32 ulp (<= 2^-24 for |cos|, |sin| <= 1). Per rotated value this
// adds at most 2^-23 |x| for each of the pair's two inputs.
inline constexpr double kGpuPrepareCosSinAbs = 2.0 * kGpuFp32Unit;

// Flip budget: the per-element bounds above allow a one-ulp flip anywhere,
// which alone would hide an upstream error of half an ulp (a missing
// rounding). Where both sides store the same format, a value differs only if
// the fp32 norm moved a norm output x across a rounding boundary: probability
// <= 2 eps_n |x| / ulp(x) < 2^9 eps_n (ulp(x) > 2^-8 |x|), with eps_n =
// gpu_prepare_norm_rel(dim); such a flip moves both values of its RoPE pair,
// and later roundings differ only when their inputs do: <= 2^10 eps_n per
// stored value (4.4e-3 at dim 256; measured ~1e-5). Of n values at most twice
// that expectation plus 8 may differ (a missing bf16 rounding of the pooled
// means flips ~25% of the compressed values).
inline double gpu_prepare_flip_budget(double n, int dim) {
  return 8.0 + 2.0 * 0x1p10 * gpu_prepare_norm_rel(dim) * n;
}

// ---- GPU prefill paths (tests/gpu/select_prefill_test.cpp, sparse_attention_prefill_test.cpp) ----
// Select: the prefill path computes every score with the decode path's fma
// sequence, so the two agree bit for bit (no tolerance); both are held to
// gpu_select_score_tol against the reference.
// Attention, prefill kernel against the reference: the decode kernel's
// per-row arithmetic (the same fp32 logit dot, fp32 online softmax, fp32 PV
// chain, the same epilogue), but a row's running max and sum pass through
// every 32-entry tile of its tile's entry list (`entries`, the union of the
// tile's rows), attended or not. A tile the row skips changes nothing (its
// max stays, alpha = exp(0) = 1 exactly, P = 0 adds exact zeros), but the
// bound does not count on that: gpu_attention_fp32_tol with the n/128 rescale
// term replaced by one u32 per 32-entry tile, entries/32. The bf16-P term
// (kGpuAttentionBf16PRel, rounding against any running max) and the logit
// term apply unchanged.
inline double gpu_attention_prefill_fp32_tol(double v_max, double s_abs, int dim, double n, double entries) {
  return (2.0 * gpu_fp32_sum_rel(dim) * s_abs + 2.0 * gpu_fp32_sum_rel(n) +
          (16.0 + entries / 32.0) * kGpuFp32Unit) *
         v_max;
}

// Prefill against decode, per element: each lies within its own bound of the
// same reference value, so |prefill - decode| <= tol_decode + tol_prefill
// (triangle inequality).
inline double gpu_attention_path_agreement_tol(double tol_decode, double tol_prefill) {
  return tol_decode + tol_prefill;
}

// ---- GPU attention with bf16-normalised P (tests/gpu/sparse_attention_normalized_test.cpp) ----
// P_j = bf16(exp(S_j - m) / l) (hf-eager), m and l the row's max and sum:
// fp32 on the GPU (a merge of per-split (m, l) by log-sum-exp), fp64 in the
// reference. Before rounding the two weights differ by what
// gpu_attention_fp32_tol already bounds (logit dot, exp, sum, division;
// weights that sum to 1 as with the divisor l). Rounding is monotone and
// the fp32 difference is far below a bf16 ulp, so the rounded weights are
// equal or neighbours: |bf16(x) - bf16(y)| <= |x - y| + (one spacing), and
// two neighbouring bf16 values r1 < r2 differ by ulp(r1) <= 2^-7 r1, so by
// at most 2^-7 of the reference's rounded weight P_j. Summed over the row:
// |dA| <= fp32 term + 2^-7 Σ P_j|V_j| <= fp32 term + 2^-7 (1 + 2^-8) v_max,
// since the rounded weights, each within half an ulp (2^-8 relative) of
// weights summing to 1, sum to <= 1 + 2^-8. The relative factor below is
// that 2^-7 (1 + 2^-8) = kBf16Eps (1 + kBf16Eps / 2).
inline constexpr double kGpuAttentionBf16NormalizedPRel = kBf16Eps * (1.0 + kBf16Eps / 2.0);

}  // namespace qsa::tol
