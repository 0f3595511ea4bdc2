// Per-stage tolerances for replay and sweeps, derived from the config rather
// than picked per trace. Every bound is a formula; Tolerance::why carries it
// with the numbers filled in, and docs/replay.md explains the derivation.
//
// A stage's path is the list of rounding points between the step's input
// (hidden states) and the stage's output, e.g. q: projection store, norm
// store, RoPE store; attn: q's and k's paths, v's projection, the KV store,
// the attention output. n is the summed reduction length along the path
// (hidden for projections, head dim for norms, r for pooling, W tokens for
// attention, H·D for o_proj) and m the stage's typical magnitude: 1 for
// activations (unit-RMS norms, 1/sqrt(n)-scaled projections), s·H_I·sqrt(d_I)
// for block scores.
//
// kSameImplementation (the reference replaying a trace it produced: the same
// fp64 code on both sides): only summation order and libm may differ, by a
// few fp64 ulps per reduction term, so rel = 64·2^-53·sqrt(n), abs = rel·m,
// rel_l2 = rel. A storage rounding could flip only when fp64 noise lands
// within 2^-45 relative of a bf16 midpoint (probability ~1e-13 per element),
// so rounding points contribute nothing.
//
// kEngine (an engine's recorded outputs against the reference emulating its
// precision knobs): the engine accumulates in fp32, so at each rounding point
// both sides round values that differ by ~2^-24·sqrt(n) relative and agree
// except in the rare cases where that noise straddles a rounding midpoint;
// then they differ by one unit of that point's format: u = 2^-7 (bf16) or
// 2^-3 (fp8 indexer/KV stores, Octave codes treated alike), or 2^-24 for an
// fp32 store when !round_storage (an fp32 model against unrounded fp64).
//   rel    = sum_i u_i + 8·2^-24·sqrt(n)   (each point may flip once; first order)
//   abs    = rel·m                          (floor for values near zero)
//   rel_l2 = sqrt(sum_i u_i^2)/8 + 4·2^-24·sqrt(n)
// Matched roundings flip only where the fp32 noise of one reduction
// (n_i <= 6144) lands that close to a midpoint: a fraction f <= 2·2^-24·
// sqrt(6144)/2^-8 ~ 2.4e-3 of the elements, so their rel_l2 is about
// sqrt(f)·sqrt(sum u_i^2) ~ sqrt(sum u_i^2)/20: the bound passes it by 2.5x.
// A rounding left unmatched (one side rounds, the other does not) adds its
// rounding error, uniform within half an ulp: (u/2)/sqrt(3) ~ u/3.5 RMS, so
// the bound fails once about a fifth of the path's roundings are unmatched.
// Measured differences it must tell apart (at the layer output): the
// storage-point emulation against transformers' hf-eager, 3-6e-2 (spec
// section 11), and the engine profile against the exact one, 4-7e-3
// (tests/tolerances.hpp, kDriverEngineVsExactOutRelL2), fail; matched
// roundings (hf-eager emulated against transformers: 3-6e-4) pass.
//
// These are starting points, to be checked against recorded HF and engine
// traces; docs/replay.md records the measured values.
#pragma once

#include <string>
#include <vector>

#include "harness/compare/compare.hpp"
#include "reference/core/config.hpp"

namespace qsa {

enum class ToleranceContext { kSameImplementation, kEngine };
std::string to_string(ToleranceContext ctx);  // "same-implementation", "engine"

// Stages: index_q, raw_keys, comp_keys, block_scores, q, k, v, gate, attn,
// gated, out. InputError naming the known stages for any other name (integer
// stages such as block_ids and token_idx are compared exactly).
Tolerance stage_tolerance(const QsaConfig& c, const std::string& stage, ToleranceContext ctx);
const std::vector<std::string>& tolerance_stage_names();

// Tie band for compare_selection, relative to max(1, |s_k|). Engine with bf16
// storage: 1e-2 (spec section 11: near-ties within 1e-2 relative flipped
// between transformers in bf16 and the storage-point emulation); fp32 engine:
// 1e-5 (~2^-24·sqrt(d_I·H_I)·a safety factor for the fp32 score sums);
// same implementation: 1e-12 (fp64 summation-order noise only).
double selection_tie_tolerance(const QsaConfig& c, ToleranceContext ctx);

}  // namespace qsa
