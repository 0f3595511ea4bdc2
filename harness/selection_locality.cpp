#include "harness/selection_locality.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "reference/core/stage_params.hpp"

namespace qsa {

namespace {

// A row's selection as a sorted set of its distinct non-negative ids.
std::vector<int32_t> row_set(const TensorI32& rows, int64_t row) {
  const int64_t width = rows.dim(1);
  const int32_t* ids = rows.data.data() + row * width;
  std::vector<int32_t> set;
  set.reserve(static_cast<size_t>(width));
  for (int64_t j = 0; j < width; ++j)
    if (ids[j] >= 0) set.push_back(ids[j]);
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

int64_t intersection_size(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t n = 0;
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i < *j) {
      ++i;
    } else if (*j < *i) {
      ++j;
    } else {
      ++n;
      ++i;
      ++j;
    }
  }
  return n;
}

}  // namespace

void SelectionLocality::add(const SelectionLocality& other) {
  rows += other.rows;
  selected += other.selected;
  pairs += other.pairs;
  jaccard_sum += other.jaccard_sum;
  if (tiles.empty()) tiles = std::vector<TileReuse>(other.tiles.size());
  for (size_t i = 0; i < tiles.size() && i < other.tiles.size(); ++i) {
    tiles[i].rows = other.tiles[i].rows;
    tiles[i].tiles += other.tiles[i].tiles;
    tiles[i].selected += other.tiles[i].selected;
    tiles[i].unions += other.tiles[i].unions;
    tiles[i].slots += other.tiles[i].slots;
  }
}

SelectionLocality selection_locality(const TensorI32& ids, const std::vector<int32_t>& query_start_loc,
                                     const std::vector<int>& tile_rows) {
  if (ids.rank() != 2)
    throw InputError("selection locality: the ids have shape " + shape_to_string(ids.shape) + ", expected [T, W]");
  if (query_start_loc.empty() || query_start_loc.front() != 0)
    throw InputError("selection locality: query_start_loc must start at 0");
  for (size_t r = 1; r < query_start_loc.size(); ++r)
    if (query_start_loc[r] < query_start_loc[r - 1])
      throw InputError("selection locality: query_start_loc decreases at request " + std::to_string(r - 1));
  if (query_start_loc.back() > ids.dim(0))
    throw InputError("selection locality: the ids have " + std::to_string(ids.dim(0)) +
                     " rows, the requests have " + std::to_string(query_start_loc.back()));
  SelectionLocality out;
  for (const int h : tile_rows) {
    if (h < 1) throw InputError("selection locality: a tile height must be at least 1, got " + std::to_string(h));
    TileReuse t;
    t.rows = h;
    out.tiles.push_back(t);
  }

  for (size_t r = 0; r + 1 < query_start_loc.size(); ++r) {
    const int64_t first = query_start_loc[r];
    const int64_t end = query_start_loc[r + 1];
    std::vector<std::vector<int32_t>> sets;
    sets.reserve(static_cast<size_t>(end - first));
    for (int64_t row = first; row < end; ++row) sets.push_back(row_set(ids, row));
    for (size_t i = 0; i < sets.size(); ++i) {
      if (sets[i].empty()) continue;
      ++out.rows;
      out.selected += static_cast<int64_t>(sets[i].size());
      if (i == 0 || sets[i - 1].empty()) continue;
      const int64_t both = intersection_size(sets[i - 1], sets[i]);
      const int64_t either = static_cast<int64_t>(sets[i - 1].size() + sets[i].size()) - both;
      ++out.pairs;
      out.jaccard_sum += static_cast<double>(both) / static_cast<double>(either);
    }
    for (TileReuse& t : out.tiles) {
      for (size_t begin = 0; begin < sets.size(); begin += static_cast<size_t>(t.rows)) {
        const size_t stop = std::min(sets.size(), begin + static_cast<size_t>(t.rows));
        std::vector<int32_t> tile_union;
        for (size_t i = begin; i < stop; ++i) {
          std::vector<int32_t> merged;
          merged.reserve(tile_union.size() + sets[i].size());
          std::set_union(tile_union.begin(), tile_union.end(), sets[i].begin(), sets[i].end(),
                         std::back_inserter(merged));
          tile_union.swap(merged);
          t.selected += static_cast<int64_t>(sets[i].size());
        }
        ++t.tiles;
        t.unions += static_cast<int64_t>(tile_union.size());
        t.slots += static_cast<int64_t>(stop - begin) * static_cast<int64_t>(tile_union.size());
      }
    }
  }
  return out;
}

TensorI32 counted_token_ids(const TensorI32& token_idx, bool count_column) {
  if (token_idx.rank() != 2 || (count_column && token_idx.dim(1) < 1))
    throw InputError("selection locality: token_idx has shape " + shape_to_string(token_idx.shape) +
                     (count_column ? ", expected [T, W + 1]" : ", expected [T, W]"));
  if (!count_column) return token_idx;
  const int64_t rows = token_idx.dim(0), columns = token_idx.dim(1);
  TensorI32 ids({rows, columns - 1}, -1);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = attended_columns(token_idx.row(r), columns, true);
    for (int64_t c = 0; c < n; ++c) ids.at(r, c) = token_idx.at(r, c);
  }
  return ids;
}

}  // namespace qsa
