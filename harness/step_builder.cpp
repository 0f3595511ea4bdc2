#include "harness/step_builder.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "reference/core/errors.hpp"

namespace qsa {

StepBuilder::StepBuilder(const QsaConfig& config, const std::vector<int64_t>& max_lens)
    : config_(config), max_lens_(max_lens), cached_(max_lens.size(), 0) {
  for (int64_t len : max_lens) {
    const int64_t n = std::max<int64_t>(1, (len + config.page_size - 1) / config.page_size);
    std::vector<int32_t> pages(n);
    for (auto& p : pages) p = static_cast<int32_t>(num_pages_++);
    pages_.push_back(std::move(pages));
  }
}

CacheGeometry StepBuilder::geometry() const { return {num_pages_, num_pages_}; }

StepMetadata StepBuilder::next(const std::vector<Chunk>& chunks, int64_t padding, bool mtp_reuse) {
  StepMetadata m;
  const int R = static_cast<int>(chunks.size());
  size_t width = 0;
  for (const auto& ch : chunks) width = std::max(width, pages_.at(ch.req).size());
  m.block_table = TensorI32({R, static_cast<int64_t>(width)}, -1);
  m.query_start_loc.push_back(0);
  std::vector<int64_t> positions;
  for (int i = 0; i < R; ++i) {
    const Chunk& ch = chunks[i];
    const int64_t start = cached_.at(ch.req);
    if (start + ch.tokens > max_lens_[ch.req])
      throw InputError(fmt::format("request {} would grow to {} tokens, beyond its {}", ch.req,
                                   start + ch.tokens, max_lens_[ch.req]));
    m.query_start_loc.push_back(m.query_start_loc.back() + ch.tokens);
    m.seq_lens.push_back(static_cast<int32_t>(start + ch.tokens));
    for (size_t j = 0; j < pages_[ch.req].size(); ++j) m.block_table.at(i, j) = pages_[ch.req][j];
    for (int32_t o = 0; o < ch.tokens; ++o) positions.push_back(start + o);
    cached_[ch.req] = start + ch.tokens;
  }
  positions.insert(positions.end(), padding, -1);
  m.positions = TensorI64({static_cast<int64_t>(positions.size())});
  m.positions.data = positions;
  m.mtp_reuse = mtp_reuse;
  return m;
}

void StepBuilder::rewind(int req, int64_t n) { cached_.at(req) = std::max<int64_t>(0, cached_.at(req) - n); }

}  // namespace qsa
