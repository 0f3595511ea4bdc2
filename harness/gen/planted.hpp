// Directions the generator plants in hidden states and bridges in the
// weights; shared by structured_weights.cpp and generator.cpp so both agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/core/rng.hpp"

namespace qsa::gen {

// A unit vector from its own RNG stream; dims below `from` stay zero (used
// to keep bridges out of the rotated dims, where RoPE would scramble them).
inline std::vector<double> unit_vector(uint64_t seed, const std::string& name, int n, int from = 0) {
  std::vector<double> v(static_cast<size_t>(n), 0.0);
  const CounterRng rng(seed, name);
  double norm = 0;
  for (int i = from; i < n; ++i) {
    v[static_cast<size_t>(i)] = rng.normal(static_cast<uint64_t>(i));
    norm += v[static_cast<size_t>(i)] * v[static_cast<size_t>(i)];
  }
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

// Hidden-space directions: every token carries kQuery; sinks carry kSink;
// needles kNeedle; the tokens that ask for the needles (the prompt's last
// tenth and every generated token) carry kAsk.
inline constexpr const char* kQuery = "gen.dir.query";
inline constexpr const char* kSink = "gen.dir.sink";
inline constexpr const char* kAsk = "gen.dir.ask";
inline constexpr const char* kNeedle = "gen.dir.needle";

}  // namespace qsa::gen
