// How much the selections of neighbouring rows overlap, from a step's
// token ids (token_idx) or block ids (block_ids): what a prefill attention
// kernel that loads each tile's union of selected K/V once (the plan-based
// kernels, gpu/attention/sparse_attention_plan.hpp) saves over gathering
// every row's selection on its own, as the decode kernel does. `qsa inspect
// --selections` prints it (docs/cli.md); docs/performance.md uses it to
// size prefill attention.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/tensor.hpp"

namespace qsa {

// Tiles of `rows` consecutive rows of one request (a request's last tile may
// be shorter), as the prefill plan groups them.
struct TileReuse {
  int rows = 0;
  int64_t tiles = 0;
  int64_t selected = 0;  // sum over the tiles' rows of their selection sizes
  int64_t unions = 0;    // sum over the tiles of their union's size
  int64_t slots = 0;     // sum over the tiles of (rows in the tile) x (union size)
  // Ids a per-row gather loads per id a union tile loads (1 .. rows): the
  // factor by which the tile kernel reads fewer K/V bytes.
  double reuse() const { return unions > 0 ? static_cast<double>(selected) / static_cast<double>(unions) : 1.0; }
  // Share of the tile kernel's (row, id) pairs that a row really attends:
  // the rest is masked work (1/rows .. 1).
  double useful() const { return slots > 0 ? static_cast<double>(selected) / static_cast<double>(slots) : 1.0; }
};

struct SelectionLocality {
  int64_t rows = 0;          // rows of real requests that select at least one id
  int64_t selected = 0;      // their selected ids, each distinct id of a row once
  int64_t pairs = 0;         // neighbouring row pairs of one request, both rows selecting
  double jaccard_sum = 0.0;  // sum over those pairs of |A ∩ B| / |A ∪ B|
  std::vector<TileReuse> tiles;  // one per requested tile height, in the order asked

  double ids_per_row() const { return rows > 0 ? static_cast<double>(selected) / static_cast<double>(rows) : 0.0; }
  double jaccard() const { return pairs > 0 ? jaccard_sum / static_cast<double>(pairs) : 0.0; }
  // Adds another step's counts (same tile heights).
  void add(const SelectionLocality& other);
};

// ids: [T, W], a row's selected ids, block ids or token ids (negative
// entries are empty slots and ignored; a repeated id counts once).
// query_start_loc: [R + 1], the rows of request r are [query_start_loc[r],
// query_start_loc[r + 1]); rows past query_start_loc[R] are padding and
// ignored. tile_rows: the tile heights to report, each >= 1. Throws
// InputError when the shapes disagree (fewer rows than query_start_loc[R], a
// decreasing query_start_loc) or a tile height is < 1.
SelectionLocality selection_locality(const TensorI32& ids, const std::vector<int32_t>& query_start_loc,
                                     const std::vector<int>& tile_rows);

// A token_idx's ids as selection_locality takes them: with the count column
// (count_column, the last column) dropped and the columns past its bound,
// clamped to [0, W] as the reference clamps it, emptied (-1). Without it,
// the rows unchanged.
TensorI32 counted_token_ids(const TensorI32& token_idx, bool count_column);

}  // namespace qsa
