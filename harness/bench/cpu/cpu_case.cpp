#include "harness/bench/cpu/cpu_case.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "harness/example_run.hpp"
#include "harness/step_builder.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/weights.hpp"

namespace qsa::bench {

namespace {

// Cached values are drawn from a pool of random bf16 values at random
// offsets: fresh-looking data without 10^8 normal draws for a long context.
constexpr int64_t kValuePool = int64_t{1} << 16;

std::string case_key(const QsaConfig& c, const StepShape& s) {
  std::string key = fmt::format("h{}_H{}_D{}_K{}_r{}_P{}_kv{}_ix{}", c.hidden_size, c.num_heads, c.head_dim, c.budget,
                                c.compress_ratio, c.page_size, to_string(c.kv_dtype), to_string(c.indexer_dtype));
  for (const RequestChunk& q : s.requests) key += fmt::format("_{}+{}", q.context, q.query_len);
  return key;
}

// The weights depend on the model dimensions only; keep the last set.
const LayerWeights& weights_for(const QsaConfig& c) {
  static std::string key;
  static LayerWeights w;
  const std::string k = fmt::format("{}_{}_{}_{}_{}_{}", c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
                                    c.indexer_heads, c.indexer_head_dim);
  if (k != key) {
    w = random_weights(c, kCpuBenchSeed);
    key = k;
  }
  return w;
}

void fill_context(StepDriver& d, const StepLayout& hist) {
  const QsaConfig& c = d.config();
  const int64_t width = std::max<int64_t>(int64_t{c.num_kv_heads} * c.head_dim, c.indexer_head_dim);
  std::vector<double> pool(static_cast<size_t>(kValuePool + width));
  const CounterRng values(kCpuBenchSeed, "bench.cpu.values"), offsets(kCpuBenchSeed, "bench.cpu.offsets");
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = round_bf16(values.normal(i));
  auto at = [&](int64_t t, int which) {
    return &pool[offsets.bits(static_cast<uint64_t>(3 * t + which)) % static_cast<uint64_t>(kValuePool)];
  };
  for (int64_t t = 0; t < hist.num_valid_tokens; ++t) {
    const int64_t p = hist.pos[t];
    d.kv_cache().write(hist.main_slot[t], p, at(t, 0), at(t, 1));
    if (hist.compressed_slot[t] >= 0) d.compressed_cache().write(hist.compressed_slot[t], p / c.compress_ratio, at(t, 2));
    if (hist.ring_slot[t] >= 0) {
      const int64_t rope3[3] = {hist.rope_pos.at(0, t), hist.rope_pos.at(1, t), hist.rope_pos.at(2, t)};
      d.ring().write(hist.ring_slot[t], p, rope3, at(t, 2));
    }
  }
}

std::unique_ptr<CpuCase> build_case(const QsaConfig& c, const StepShape& s) {
  auto cc = std::make_unique<CpuCase>();
  cc->config = c;
  cc->shape = s;
  std::vector<int64_t> max_lens;
  std::vector<StepBuilder::Chunk> history, step;
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const RequestChunk& q = s.requests[i];
    max_lens.push_back(q.seq_len());
    if (q.context > 0) history.push_back({static_cast<int>(i), static_cast<int32_t>(q.context)});
    step.push_back({static_cast<int>(i), static_cast<int32_t>(q.query_len)});
  }
  StepBuilder builder(c, max_lens);
  cc->driver = std::make_unique<StepDriver>(c, weights_for(c), builder.geometry());
  if (!history.empty())
    fill_context(*cc->driver, derive_step_layout(c, builder.geometry(), builder.next(history)));
  cc->meta = builder.next(step);
  cc->hidden = random_hidden(c, s.rows(), kCpuBenchSeed, "bench.cpu.hidden");
  cc->out = cc->driver->run(cc->meta, cc->hidden);
  return cc;
}

}  // namespace

CpuCase& cpu_case(const QsaConfig& config, const StepShape& shape) {
  static std::unique_ptr<CpuCase> last;
  static std::string last_key;
  const std::string key = case_key(config, shape);
  if (!last || key != last_key) {
    last.reset();  // free the previous case before building the next
    last = build_case(config, shape);
    last_key = key;
  }
  return *last;
}

}  // namespace qsa::bench
