#include "reference/attention.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <vector>

#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"

namespace qsa {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMajor>;
using ConstMatMap = Eigen::Map<const RowMajor>;
using StridedMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;

// Per-thread buffers, reused across rows so that the hot loop never allocates.
struct RowScratch {
  std::vector<int32_t> dense_ids;  // 0..p for dense attention
  std::vector<int64_t> slots;      // valid entries of the row, in row order
  std::vector<int32_t> ids;
  std::vector<double> k, v;        // [n, G, D]: whole slots, so one copy serves every group
  std::vector<double> w;           // [H/G, n] logits, then softmax weights
  std::vector<double> divisor;     // [H/G]
};

void check_inputs(const AttentionParams& p, const TensorD& q, const StepLayout& layout,
                  const MainKvCache& cache) {
  if (p.heads <= 0 || p.kv_heads <= 0 || p.head_dim <= 0 || p.heads % p.kv_heads != 0)
    throw InputError(fmt::format("attention: heads = {} and kv_heads = {} must be positive with kv_heads "
                                 "dividing heads (head_dim = {})",
                                 p.heads, p.kv_heads, p.head_dim));
  const KvCacheParams& c = cache.params();
  if (c.kv_heads != p.kv_heads || c.head_dim != p.head_dim || c.page_size != p.page_size)
    throw InputError(fmt::format("attention expects G = {}, D = {}, page size {} but the main KV cache has "
                                 "G = {}, D = {}, page size {}",
                                 p.kv_heads, p.head_dim, p.page_size, c.kv_heads, c.head_dim, c.page_size));
  require_shape(q, {layout.num_tokens, p.heads, p.head_dim}, "attention q");
  if (static_cast<int64_t>(layout.token_to_req.size()) != layout.num_tokens)
    throw InputError(fmt::format("step layout has {} token_to_req entries for {} tokens",
                                 layout.token_to_req.size(), layout.num_tokens));
}

// Collects the entries of one row that attention may read: -1 and ids outside
// [0, L) are skipped, as are unmapped pages; a mapped slot must hold the id.
void gather_valid(const AttentionParams& p, const StepLayout& layout, const MainKvCache& cache,
                  int64_t row, int req, const int32_t* ids, int64_t n, RowScratch& s) {
  s.slots.clear();
  s.ids.clear();
  const int64_t L = layout.seq_lens[req];
  for (int64_t c = 0; c < n; ++c) {
    const int32_t t = ids[c];
    if (t < 0 || t >= L) continue;
    const int64_t slot = paged_slot(layout.block_table, req, t, p.page_size);
    if (slot < 0) continue;
    if (slot >= cache.num_slots())
      throw InputError(fmt::format("token id {} of request {} (row {}) maps to main KV slot {}, past the "
                                   "cache's {} slots",
                                   t, req, row, slot, cache.num_slots()));
    const int64_t held = cache.position_at(slot);
    if (held != t)
      throw InputError(fmt::format("main KV slot {} for token id {} of request {} (row {}) holds position {}: "
                                   "{}; the trace reads a token the cache does not hold",
                                   slot, t, req, row, held,
                                   held < 0 ? "it was never written" : "it was overwritten by another token"));
    s.slots.push_back(slot);
    s.ids.push_back(t);
  }
}

// Copies the K and V rows the row attends into contiguous buffers, choosing
// Octave's exact shadow copies for sink and window tokens.
void gather_kv(const AttentionParams& p, const MainKvCache& cache, int64_t L, RowScratch& s) {
  const size_t n = s.slots.size();
  const size_t width = static_cast<size_t>(p.kv_heads) * p.head_dim;
  s.k.resize(n * width);
  s.v.resize(n * width);
  for (size_t j = 0; j < n; ++j) {
    const int64_t t = s.ids[j];
    const bool exact = p.octave_shadow && (t < p.octave_sinks || t >= L - p.octave_window);
    const double* kr = exact ? cache.k_exact(s.slots[j], 0) : cache.k(s.slots[j], 0);
    const double* vr = exact ? cache.v_exact(s.slots[j], 0) : cache.v(s.slots[j], 0);
    std::memcpy(&s.k[j * width], kr, width * sizeof(double));
    std::memcpy(&s.v[j * width], vr, width * sizeof(double));
  }
}

// Turns one head's logits into PV weights in place and returns the divisor
// that normalises the weighted sum (1 when the weights already sum to 1).
double softmax_weights(const AttentionParams& p, double* w, int64_t n) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    if (p.round_logits) w[j] = round_bf16(round_bf16(w[j]) * p.scale);
    else w[j] *= p.scale;
    mx = std::max(mx, w[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    w[j] = std::exp(w[j] - mx);
    sum += w[j];
  }
  switch (p.p_rounding) {
    case PRounding::kNone:
      return sum;
    case PRounding::kBf16Unnormalized:
      for (int64_t j = 0; j < n; ++j) w[j] = round_bf16(w[j]);
      return sum;
    case PRounding::kBf16Normalized:
      for (int64_t j = 0; j < n; ++j) w[j] = round_bf16(w[j] / sum);
      return 1.0;
  }
  return sum;
}

// The one routine both entry points share: one output row from its candidate ids.
void attend_row(const AttentionParams& p, const TensorD& q, const StepLayout& layout,
                const MainKvCache& cache, int64_t row, const int32_t* ids, int64_t n_ids, RowScratch& s,
                TensorD& out) {
  double* out_row = out.row(row);
  const int64_t HD = int64_t{p.heads} * p.head_dim;
  const int req = layout.token_to_req[row];
  if (req >= 0) gather_valid(p, layout, cache, row, req, ids, n_ids, s);
  if (req < 0 || s.slots.empty()) {
    std::fill(out_row, out_row + HD, 0.0);
    return;
  }
  gather_kv(p, cache, layout.seq_lens[req], s);
  const int64_t n = static_cast<int64_t>(s.slots.size());
  const int D = p.head_dim;
  const int group = p.heads / p.kv_heads;
  const Eigen::OuterStride<> stride(int64_t{p.kv_heads} * D);
  s.w.resize(static_cast<size_t>(group) * n);
  s.divisor.resize(group);
  for (int g = 0; g < p.kv_heads; ++g) {
    const ConstMatMap qg(q.row(row) + int64_t{g} * group * D, group, D);
    const StridedMap kg(s.k.data() + int64_t{g} * D, n, D, stride);
    const StridedMap vg(s.v.data() + int64_t{g} * D, n, D, stride);
    MatMap w(s.w.data(), group, n);
    w.noalias() = qg * kg.transpose();
    for (int h = 0; h < group; ++h) s.divisor[h] = softmax_weights(p, s.w.data() + int64_t{h} * n, n);
    MatMap a(out_row + int64_t{g} * group * D, group, D);
    a.noalias() = w * vg;
    for (int h = 0; h < group; ++h) a.row(h) /= s.divisor[h];
  }
  if (p.round_output)
    for (int64_t i = 0; i < HD; ++i) out_row[i] = round_bf16(out_row[i]);
}

// Runs fn(row, scratch) over all rows in parallel. An exception cannot leave
// an OpenMP region, so each thread stops at its first failure and the failure
// of the lowest row is rethrown: the same error for any thread count.
template <class Fn>
void for_each_row(int64_t rows, Fn fn) {
  std::exception_ptr error;
  int64_t error_row = rows;
#pragma omp parallel
  {
    RowScratch scratch;
    bool failed = false;
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      if (failed) continue;
      try {
        fn(row, scratch);
      } catch (...) {
        failed = true;
#pragma omp critical(qsa_attention_error)
        if (row < error_row) {
          error_row = row;
          error = std::current_exception();
        }
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

void prepare_output(const AttentionParams& p, const StepLayout& layout, TensorD& out) {
  const Shape shape = {layout.num_tokens, p.heads, p.head_dim};
  if (out.shape != shape) out = TensorD(shape);
}

}  // namespace

void sparse_attention(const AttentionParams& p, const TensorD& q, const TensorI32& token_idx,
                      const StepLayout& layout, const MainKvCache& cache, TensorD& out) {
  check_inputs(p, q, layout, cache);
  if (p.index_width < 0 || (p.count_column && p.index_width < 1))
    throw InputError(fmt::format("attention: index_width = {} leaves no room for the count column",
                                 p.index_width));
  require_shape(token_idx, {layout.num_tokens, p.index_width}, "attention token_idx");
  prepare_output(p, layout, out);
  const int64_t width = p.index_width;
  for_each_row(layout.num_tokens, [&](int64_t row, RowScratch& s) {
    const int32_t* ids = token_idx.row(row);
    attend_row(p, q, layout, cache, row, ids, attended_columns(ids, width, p.count_column), s, out);
  });
}

void dense_causal_attention(const AttentionParams& p, const TensorD& q, const StepLayout& layout,
                            const MainKvCache& cache, TensorD& out) {
  check_inputs(p, q, layout, cache);
  prepare_output(p, layout, out);
  for_each_row(layout.num_tokens, [&](int64_t row, RowScratch& s) {
    const int64_t pos = layout.pos[row];
    s.dense_ids.resize(static_cast<size_t>(std::max<int64_t>(pos + 1, 0)));
    for (int64_t t = 0; t <= pos; ++t) s.dense_ids[t] = static_cast<int32_t>(t);
    attend_row(p, q, layout, cache, row, s.dense_ids.data(), pos + 1, s, out);
  });
}

}  // namespace qsa
