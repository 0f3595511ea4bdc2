#include "reference/side_caches.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "reference/core/errors.hpp"

namespace qsa {

RawKeyRing::RawKeyRing(int64_t num_blocks, int capacity, int dim)
    : num_blocks_(num_blocks), capacity_(capacity), dim_(dim) {
  if (num_blocks <= 0 || capacity <= 0 || dim <= 0)
    throw ConfigError(fmt::format("raw-key ring needs positive sizes (blocks {}, capacity {}, dim {})",
                                  num_blocks, capacity, dim));
  const size_t slots = static_cast<size_t>(num_blocks) * capacity;
  keys_.assign(slots * dim, 0.0);
  tag_.assign(slots, -1);
  rope_.assign(slots, {-1, -1, -1});
}

void RawKeyRing::write(int64_t slot, int64_t position, const int64_t rope3[3], const double* key) {
  if (slot < 0 || slot >= num_blocks_ * capacity_)
    throw InputError(fmt::format("ring slot {} is out of range ({} slots)", slot, num_blocks_ * capacity_));
  std::copy(key, key + dim_, &keys_[slot * dim_]);
  tag_[slot] = position;
  rope_[slot] = {rope3[0], rope3[1], rope3[2]};
}

const double* RawKeyRing::read(int64_t ring_block, int64_t position, int64_t rope3[3]) const {
  if (ring_block < 0 || ring_block >= num_blocks_ || position < 0)
    throw InputError(fmt::format("raw-key ring read of block {} position {} is out of range ({} blocks)",
                                 ring_block, position, num_blocks_));
  const int64_t slot = ring_block * capacity_ + position % capacity_;
  if (tag_[slot] != position) {
    throw InputError(fmt::format(
        "raw-key ring block {} slot {} holds position {} but pooling needs position {}: the member was {} "
        "(a group straddling a chunk boundary can only read the last {} keys of earlier steps)",
        ring_block, slot, tag_[slot], position, tag_[slot] < 0 ? "never written" : "overwritten",
        capacity_));
  }
  for (int a = 0; a < 3; ++a) rope3[a] = rope_[slot][a];
  return &keys_[slot * dim_];
}

CompressedCache::CompressedCache(int64_t num_pages, int rows_per_page, int dim)
    : rows_per_page_(rows_per_page), dim_(dim) {
  if (num_pages <= 0 || rows_per_page <= 0 || dim <= 0)
    throw ConfigError(fmt::format("compressed cache needs positive sizes (pages {}, rows/page {}, dim {})",
                                  num_pages, rows_per_page, dim));
  const size_t rows = static_cast<size_t>(num_pages) * rows_per_page;
  keys_.assign(rows * dim, 0.0);
  tag_.assign(rows, -1);
}

void CompressedCache::write(int64_t slot, int64_t block, const double* key) {
  if (slot < 0 || slot >= num_rows())
    throw InputError(fmt::format("compressed slot {} is out of range ({} rows)", slot, num_rows()));
  std::copy(key, key + dim_, &keys_[slot * dim_]);
  tag_[slot] = block;
}

}  // namespace qsa
