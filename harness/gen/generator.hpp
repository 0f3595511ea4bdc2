// Synthetic traces with the structure that matters for sparse attention.
//
// Hidden states are an AR(1) process (neighbouring tokens look alike) plus
// planted directions: every token carries a "query" direction; sink tokens
// (the first `sinks` positions) and needle tokens (at chosen fractions of
// each prompt) carry matching "key" directions. The weights are random with
// rank-one bridges: q_proj maps the query direction and k_proj the key
// direction onto the same vector in the un-rotated dims of each head, and
// k_proj is partly tied to q_proj, so main attention favours sinks, needles
// and recent tokens. The indexer gets the same bridges scaled by
// `indexer_alignment` (0: a random indexer; 1: one that sees what main
// attention sees), so selection quality is a knob.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/trace/trace.hpp"
#include "reference/core/config.hpp"

namespace qsa {

struct GenOptions {
  uint64_t seed = 20261130;
  std::vector<int64_t> prompt_lens;   // per request; empty picks a preset default
  int64_t chunk = 0;                  // chunked-prefill chunk; 0 = whole prompts in one step
  int decode_steps = 3;
  int mtp_drafts = 2;                 // draft step 0 + (mtp_drafts - 1) reuse steps; 0 = none
  int64_t padding = 1;                // inert rows appended to decode steps
  int sinks = 4;
  std::vector<double> needle_fractions = {0.3, 0.7};
  double sink_strength = 3.0;         // scale of the planted key directions
  double needle_strength = 3.0;
  double locality = 0.9;              // AR(1) coefficient of the background
  double qk_tie = 0.5;                // how much k_proj copies q_proj (local attention)
  double indexer_alignment = 1.0;
  bool mrope = false;                 // 3-row positions with an image-like span
  bool inputs_only = false;           // skip recording the reference's outputs
};

// Builds the trace; unless inputs_only, runs the reference over it and
// records every stage's outputs.
Trace generate_trace(const QsaConfig& config, const GenOptions& options);

// The structured weights on their own (used by generate_trace and sweeps).
LayerWeights structured_weights(const QsaConfig& config, const GenOptions& options);

std::string describe_gen_options(const GenOptions& options);

}  // namespace qsa
