// Builds consistent step sequences for examples, tests and synthetic traces:
// each request owns a fixed list of pages (its ring block is its first page),
// and the builder tracks how many tokens of each request are cached, so
// chunked prefill, decode, mixed batches and MTP draft steps line up the way
// an engine would lay them out.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa {

class StepBuilder {
 public:
  // Requests with the given maximum lengths; pages are assigned in order.
  StepBuilder(const QsaConfig& config, const std::vector<int64_t>& max_lens);

  CacheGeometry geometry() const;
  int num_requests() const { return static_cast<int>(pages_.size()); }
  int64_t cached(int req) const { return cached_[req]; }

  struct Chunk {
    int req;
    int32_t tokens;
  };
  // The next step: the chunks in batch order (any order; each request at most
  // once), then `padding` inert rows. Advances each request by its chunk.
  StepMetadata next(const std::vector<Chunk>& chunks, int64_t padding = 0, bool mtp_reuse = false);

  // Rewinds a request by n tokens (rejected MTP drafts): their cache entries
  // stay behind and are overwritten by the next tokens at those positions.
  void rewind(int req, int64_t n);

 private:
  QsaConfig config_;
  std::vector<std::vector<int32_t>> pages_;
  std::vector<int64_t> max_lens_;
  std::vector<int64_t> cached_;
  int64_t num_pages_ = 0;
};

}  // namespace qsa
