#include "harness/sweep/sweep_policies.hpp"

#include <algorithm>
#include <numeric>

#include "reference/select.hpp"

namespace qsa {

std::vector<int32_t> indexer_order(const int32_t* block_ids, int width, int max_blocks) {
  std::vector<int32_t> out;
  for (int j = 0; j < width && j < max_blocks && block_ids[j] >= 0; ++j) out.push_back(block_ids[j]);
  return out;
}

std::vector<int32_t> oracle_order(const double* probs, int heads, int64_t n, int ratio, int32_t visible, bool max_pool,
                                  int max_blocks) {
  std::vector<double> score(static_cast<size_t>(visible), 0.0);
  for (int h = 0; h < heads; ++h) {
    const double* ph = probs + static_cast<int64_t>(h) * n;
    for (int32_t b = 0; b < visible; ++b) {
      const double* pb = ph + static_cast<int64_t>(b) * ratio;
      double pooled = pb[0];
      for (int i = 1; i < ratio; ++i) pooled = max_pool ? std::max(pooled, pb[i]) : pooled + pb[i];
      score[static_cast<size_t>(b)] += pooled;
    }
  }
  std::vector<int32_t> order(static_cast<size_t>(visible));
  std::iota(order.begin(), order.end(), 0);
  const auto k = static_cast<ptrdiff_t>(std::min<int64_t>(visible, max_blocks));
  // The canonical top-k order of the indexer: a total order, so the result
  // does not depend on the algorithm.
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return block_precedes(score[static_cast<size_t>(a)], a, score[static_cast<size_t>(b)], b);
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

std::vector<int32_t> window_order(int32_t visible, int ratio, int sinks, int max_blocks) {
  std::vector<int32_t> out;
  const int32_t sink_blocks = std::min<int32_t>(visible, (sinks + ratio - 1) / ratio);
  for (int32_t b = 0; b < sink_blocks; ++b) out.push_back(b);
  for (int32_t b = visible - 1; b >= sink_blocks; --b) out.push_back(b);
  if (static_cast<int64_t>(out.size()) > max_blocks) out.resize(static_cast<size_t>(max_blocks));
  return out;
}

std::vector<int32_t> random_order(int32_t visible, int max_blocks, const CounterRng& rng) {
  std::vector<int32_t> all(static_cast<size_t>(visible));
  std::iota(all.begin(), all.end(), 0);
  const int32_t k = std::min<int32_t>(visible, max_blocks);
  for (int32_t i = 0; i < k; ++i) {
    const auto left = static_cast<uint64_t>(visible - i);
    const auto j = static_cast<int32_t>(static_cast<uint64_t>(i) + rng.bits(static_cast<uint64_t>(i)) % left);
    std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
  }
  all.resize(static_cast<size_t>(k));
  return all;
}

}  // namespace qsa
