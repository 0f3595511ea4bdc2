// The indexer's side caches (spec section 4): the per-request raw-key ring
// and the paged compressed-key cache.
//
// Ring: raw (un-normed, un-rotated) keys at ring_block·C + p mod C, with the
// (t, h, w) RoPE position of each member, so that a group straddling a chunk
// boundary can be pooled and rotated later. Every slot records the logical
// position it holds; reading a member the ring no longer holds (overwritten,
// or never written) throws InputError rather than pooling stale keys.
//
// Compressed cache: row b of a request at block_table_c[req, b div (P/r)]·(P/r)
// + b mod (P/r), stored in the indexer dtype; each row records the block id
// written there for the same staleness check.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "reference/core/config.hpp"

namespace qsa {

class RawKeyRing {
 public:
  RawKeyRing(int64_t num_blocks, int capacity, int dim);

  int capacity() const { return capacity_; }
  int64_t num_blocks() const { return num_blocks_; }

  void write(int64_t slot, int64_t position, const int64_t rope3[3], const double* key);
  // Member `position` of the request owning `ring_block`; fills rope3.
  const double* read(int64_t ring_block, int64_t position, int64_t rope3[3]) const;
  int64_t position_at(int64_t slot) const { return tag_[slot]; }
  const double* key_at(int64_t slot) const { return &keys_[slot * dim_]; }

 private:
  int64_t num_blocks_;
  int capacity_;
  int dim_;
  std::vector<double> keys_;                 // [blocks·C, d_I]
  std::vector<int64_t> tag_;                 // [blocks·C], -1 = never written
  std::vector<std::array<int64_t, 3>> rope_; // [blocks·C]
};

class CompressedCache {
 public:
  CompressedCache(int64_t num_pages, int rows_per_page, int dim);

  int64_t num_rows() const { return static_cast<int64_t>(tag_.size()); }
  int rows_per_page() const { return rows_per_page_; }
  int dim() const { return dim_; }

  // key: [d_I] already in the indexer dtype's values.
  void write(int64_t slot, int64_t block, const double* key);
  const double* row(int64_t slot) const { return &keys_[slot * dim_]; }
  int64_t block_at(int64_t slot) const { return tag_[slot]; }

 private:
  int rows_per_page_;
  int dim_;
  std::vector<double> keys_;  // [pages·P/r, d_I]
  std::vector<int64_t> tag_;  // block id held, -1 = never written
};

}  // namespace qsa
