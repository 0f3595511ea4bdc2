#include "harness/example_run.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "harness/step_builder.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"

namespace qsa {

TensorD random_hidden(const QsaConfig& c, int64_t tokens, uint64_t seed, const std::string& stream) {
  TensorD h({tokens, c.hidden_size});
  const CounterRng rng(seed, stream);
  for (int64_t i = 0; i < h.numel(); ++i) h.data[i] = round_bf16(rng.normal(i));
  return h;
}

ExampleRun build_example(const QsaConfig& c, const ExampleOptions& o) {
  const int r = c.compress_ratio;
  const int64_t prefill = o.prefill > 0 ? o.prefill : std::max<int64_t>(4 * int64_t{c.budget} + 3, 45);
  // A chunk ending one token into a group makes that group straddle the
  // boundary, so the second chunk must pool from the ring.
  const int64_t chunk = o.chunk > 0 ? o.chunk : std::max<int64_t>(1, (prefill / 2) / r * r + 1);
  const int64_t other = std::max<int64_t>(r + 2, prefill / 3 + 2);
  const int extra = o.decode_steps + (o.mtp ? 2 : 0);
  StepBuilder b(c, {prefill + extra, other + extra});

  ExampleRun run;
  run.geometry = b.geometry();
  auto add = [&](std::string name, const std::vector<StepBuilder::Chunk>& chunks, int64_t padding, bool reuse) {
    ExampleStep s;
    s.name = std::move(name);
    s.meta = b.next(chunks, padding, reuse);
    const int64_t T = static_cast<int64_t>(s.meta.positions.numel());
    s.hidden = random_hidden(c, T, o.seed, fmt::format("hidden.step{}", run.steps.size()));
    run.steps.push_back(std::move(s));
  };

  int64_t done = std::min(chunk, prefill);
  add(fmt::format("mixed prefill: req0 chunk of {}, req1 prefill of {}", done, other),
      {{0, static_cast<int32_t>(done)}, {1, static_cast<int32_t>(other)}}, 0, false);
  while (done < prefill) {
    const int64_t n = std::min(chunk, prefill - done);
    add(fmt::format("chunked prefill: req0 tokens {}..{}", done, done + n - 1), {{0, static_cast<int32_t>(n)}}, 0,
        false);
    done += n;
  }
  for (int i = 0; i < o.decode_steps; ++i)
    add(fmt::format("decode {} (1 padding row)", i), {{1, 1}, {0, 1}}, 1, false);
  if (o.mtp) {
    add("MTP draft step 0 (selects)", {{0, 1}, {1, 1}}, 0, false);
    add("MTP draft step 1 (reuses step-0 rows)", {{0, 1}, {1, 1}}, 0, true);
  }
  return run;
}

}  // namespace qsa
