// A request's context K/V as a sweep reads it: the exact values from the
// driver's main cache, and each swept KV dtype applied the way an engine's
// cache stores it.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/kv_cache.hpp"

namespace qsa {

struct ContextKv {
  int64_t tokens = 0;                   // n: positions 0..n-1
  int width = 0;                        // G·D values per token
  std::vector<double> k, v;             // exact, [n, G, D]
  std::vector<std::vector<double>> kq;  // per swept KV dtype, [n, G, D]
  std::vector<std::vector<double>> vq;
};

// Reads tokens 0..n-1 of request `req` through the step's block table. The
// driver runs the exact profile with bf16 KV, so the cache holds fp64 values.
// InputError when a token's page is unmapped or its slot holds another
// position: dense attention over the whole context needs every token.
ContextKv gather_context(const MainKvCache& cache, const StepLayout& layout, int req, int64_t n);

// KV params of one swept dtype as an engine stores it: bf16 rounds; fp8 keeps
// fp8(x / scale) with the trace's scales and flavour; Octave encodes the bf16
// value, and tokens in the first `sinks` or the last `window` positions (t >=
// L - window, L the step's seq_len) read the bf16 exact copies.
KvCacheParams sweep_kv_params(const QsaConfig& trace_config, KvDtype dtype, int octave_window, int octave_sinks);

// Appends ctx.kq / ctx.vq for each params (one per swept dtype); seq_len is
// the request's L in the step (for Octave's window).
void quantize_context(const std::vector<KvCacheParams>& dtypes, int64_t seq_len, ContextKv& ctx);

}  // namespace qsa
