#include "reference/select.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "reference/core/errors.hpp"

namespace qsa {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Rows scored together share each chunk of compressed keys while it is hot in
// cache. Neither size changes a result: every score comes from the same
// kernel call pattern per block, whatever tile it sits in.
constexpr int64_t kRowTile = 64;
constexpr int64_t kBlockChunk = 32;

// Two doubles per SSE2 / NEON register. GCC and Clang vector types have
// elementwise IEEE semantics, so the lanes below are a fixed summation order,
// not a licence to reassociate.
typedef double Lanes2 __attribute__((vector_size(16)));

inline Lanes2 load2(const double* p) {
  Lanes2 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A d-term dot with a fixed summation order: lane l sums the terms j = l mod 8
// in increasing j, then the lanes meet in a fixed tree. Fixing the order is
// what makes the tiled select_rows bit-identical to block_scores_row.
inline double lane_dot(const double* a, const double* b, int d) {
  Lanes2 v0 = {0.0, 0.0}, v1 = v0, v2 = v0, v3 = v0;
  int j = 0;
  for (; j + 8 <= d; j += 8) {
    v0 += load2(a + j) * load2(b + j);
    v1 += load2(a + j + 2) * load2(b + j + 2);
    v2 += load2(a + j + 4) * load2(b + j + 4);
    v3 += load2(a + j + 6) * load2(b + j + 6);
  }
  double acc[8] = {v0[0], v0[1], v1[0], v1[1], v2[0], v2[1], v3[0], v3[1]};
  for (int l = 0; j + l < d; ++l) acc[l] += a[j + l] * b[j + l];
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// std::max(0.0, NaN) is 0: a NaN dot must poison the score instead, so that a
// broken key ranks first (as torch.topk ranks NaN) rather than vanishing.
inline double relu_keep_nan(double x) { return std::isnan(x) ? x : (x > 0.0 ? x : 0.0); }

// scores[b] for b in [b0, b1). Kept out of line so that every caller runs the
// same machine code: inlined copies could differ in FP contraction.
[[gnu::noinline]] void score_block_range(const SelectParams& p, const double* q, const double* kc,
                                         int64_t b0, int64_t b1, double* scores) {
  for (int64_t b = b0; b < b1; ++b) {
    const double* k = kc + b * p.dim;
    double sum = 0.0;
    for (int h = 0; h < p.heads; ++h) sum += relu_keep_nan(lane_dot(q + int64_t{h} * p.dim, k, p.dim));
    scores[b] = p.score_scale * sum;
  }
}

void check_params(const SelectParams& p) {
  if (p.heads < 1 || p.dim < 1 || p.blocks_budget < 1)
    throw ConfigError(fmt::format("select params need H_I >= 1, d_I >= 1 and K_B >= 1 (got H_I = {}, "
                                  "d_I = {}, K_B = {})",
                                  p.heads, p.dim, p.blocks_budget));
}

// Fills ids/top_scores of a row that selects nothing.
void write_empty(int blocks_budget, int32_t* ids, double* top_scores) {
  std::fill(ids, ids + blocks_budget, -1);
  std::fill(top_scores, top_scores + blocks_budget, kNegInf);
}

// Output of select_rows: allocated when empty, otherwise it must already fit,
// because rows outside the range belong to the caller.
template <class T>
void prepare_output(Tensor<T>& t, int64_t rows, int blocks_budget, T fill, const char* what) {
  if (t.empty()) {
    t = Tensor<T>({rows, blocks_budget}, fill);
  } else {
    require_shape(t, {rows, blocks_budget}, what);
  }
}

}  // namespace

bool block_precedes(double score_a, int32_t id_a, double score_b, int32_t id_b) {
  const bool nan_a = std::isnan(score_a);
  const bool nan_b = std::isnan(score_b);
  if (nan_a != nan_b) return nan_a;
  if (!nan_a && score_a != score_b) return score_a > score_b;
  return id_a < id_b;
}

void block_scores_row(const SelectParams& p, const double* q, const double* kc, int64_t n_blocks,
                      double* scores) {
  check_params(p);
  if (n_blocks < 0) throw InputError(fmt::format("block_scores_row: n_blocks = {} is negative", n_blocks));
  score_block_range(p, q, kc, 0, n_blocks, scores);
}

int top_k_blocks(const double* scores, int64_t visible, int blocks_budget, int32_t* ids,
                 double* top_scores) {
  if (blocks_budget < 1)
    throw InputError(fmt::format("top_k_blocks: K_B = {} must be at least 1", blocks_budget));
  if (visible < 0 || visible > std::numeric_limits<int32_t>::max())
    throw InputError(fmt::format("top_k_blocks: visible = {} is out of range", visible));
  const int k = static_cast<int>(std::min<int64_t>(visible, blocks_budget));
  std::vector<int32_t> order(static_cast<size_t>(visible));
  std::iota(order.begin(), order.end(), 0);
  // Ids are distinct, so block_precedes is a total order and the selected set
  // and its order do not depend on the algorithm.
  auto cmp = [scores](int32_t a, int32_t b) { return block_precedes(scores[a], a, scores[b], b); };
  if (k < visible) std::nth_element(order.begin(), order.begin() + k, order.end(), cmp);
  std::sort(order.begin(), order.begin() + k, cmp);
  write_empty(blocks_budget, ids, top_scores);
  for (int i = 0; i < k; ++i) {
    ids[i] = order[i];
    top_scores[i] = scores[order[i]];
  }
  return k;
}

void select_rows(const SelectParams& p, const TensorD& q_index, const std::vector<int32_t>& visible,
                 int64_t row_begin, int64_t row_end, const TensorD& kc, TensorI32& block_ids,
                 TensorD& top_scores) {
  check_params(p);
  if (q_index.rank() != 3 || q_index.dim(1) != p.heads || q_index.dim(2) != p.dim)
    throw InputError(fmt::format("q_index has shape {}, expected [T, {}, {}] (T, H_I, d_I)",
                                 shape_to_string(q_index.shape), p.heads, p.dim));
  const int64_t T = q_index.dim(0);
  if (static_cast<int64_t>(visible.size()) != T)
    throw InputError(fmt::format("visible has {} entries for {} query rows", visible.size(), T));
  if (row_begin < 0 || row_begin > row_end || row_end > T)
    throw InputError(fmt::format("row range [{}, {}) is not within the {} query rows", row_begin,
                                 row_end, T));
  int32_t max_visible = 0;
  for (int64_t t = row_begin; t < row_end; ++t) {
    if (visible[t] < 0)
      throw InputError(fmt::format("visible[{}] = {} is negative", t, visible[t]));
    max_visible = std::max(max_visible, visible[t]);
  }
  // kc is only read when something is visible; an empty kc is fine otherwise.
  if (!kc.empty() || max_visible > 0) {
    if (kc.rank() != 2 || kc.dim(1) != p.dim)
      throw InputError(fmt::format("kc has shape {}, expected [n_blocks, {}] (d_I)",
                                   shape_to_string(kc.shape), p.dim));
    if (kc.dim(0) < max_visible)
      throw InputError(fmt::format("kc holds {} compressed blocks but a row sees {}; every visible "
                                   "block needs a compressed key",
                                   kc.dim(0), max_visible));
  }
  prepare_output(block_ids, T, p.blocks_budget, int32_t{-1}, "block_ids");
  prepare_output(top_scores, T, p.blocks_budget, kNegInf, "top_scores");

  const int64_t n_tiles = (row_end - row_begin + kRowTile - 1) / kRowTile;
#pragma omp parallel for schedule(static)
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    const int64_t t0 = row_begin + tile * kRowTile;
    const int64_t t1 = std::min(row_end, t0 + kRowTile);
    int64_t tile_visible = 0;
    for (int64_t t = t0; t < t1; ++t) tile_visible = std::max<int64_t>(tile_visible, visible[t]);
    std::vector<double> scores(static_cast<size_t>((t1 - t0) * tile_visible));
    for (int64_t b0 = 0; b0 < tile_visible; b0 += kBlockChunk) {
      const int64_t b1 = std::min(tile_visible, b0 + kBlockChunk);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t end = std::min<int64_t>(b1, visible[t]);
        if (end > b0)
          score_block_range(p, q_index.row(t), kc.ptr(), b0, end, scores.data() + (t - t0) * tile_visible);
      }
    }
    for (int64_t t = t0; t < t1; ++t)
      top_k_blocks(scores.data() + (t - t0) * tile_visible, visible[t], p.blocks_budget,
                   block_ids.row(t), top_scores.row(t));
  }
}

}  // namespace qsa
