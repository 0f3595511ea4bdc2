#include "harness/bench/batch_metadata.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "reference/core/rng.hpp"
#include "reference/core/stage_params.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/expand.hpp"

namespace qsa::bench {

namespace {

// Fills out[n, k) with distinct blocks of [0, v) that `seen` does not mark
// (it marks the first n, and is at least v long), in the order drawn, and
// marks them: rejection against the bitmap when at most half of the
// unmarked blocks are needed, else a partial Fisher-Yates shuffle of the
// unmarked ones. `draw` counts the generator's draws. n <= k <= v.
void draw_distinct(const CounterRng& rng, uint64_t& draw, int64_t v, int64_t k, int64_t n,
                   std::vector<uint8_t>& seen, std::vector<int32_t>& scratch, int32_t* out) {
  if (2 * (k - n) <= v - n) {
    while (n < k) {
      const auto b = static_cast<int32_t>(rng.bits(draw++) % static_cast<uint64_t>(v));
      if (seen[static_cast<size_t>(b)]) continue;
      seen[static_cast<size_t>(b)] = 1;
      out[n++] = b;
    }
    return;
  }
  scratch.clear();
  for (int64_t b = 0; b < v; ++b)
    if (!seen[static_cast<size_t>(b)]) scratch.push_back(static_cast<int32_t>(b));
  for (int64_t j = 0; n < k; ++j) {
    const int64_t left = static_cast<int64_t>(scratch.size()) - j;
    const int64_t pick = j + static_cast<int64_t>(rng.bits(draw++) % static_cast<uint64_t>(left));
    std::swap(scratch[static_cast<size_t>(j)], scratch[static_cast<size_t>(pick)]);
    out[n] = scratch[static_cast<size_t>(j)];
    seen[static_cast<size_t>(out[n++])] = 1;
  }
}

// k distinct blocks of [0, v) in random order.
void random_blocks(const CounterRng& rng, uint64_t row, int64_t v, int64_t k, std::vector<uint8_t>& seen,
                   std::vector<int32_t>& scratch, int32_t* out) {
  uint64_t draw = row << 32;
  if (static_cast<int64_t>(seen.size()) < v) seen.resize(static_cast<size_t>(v));
  draw_distinct(rng, draw, v, k, 0, seen, scratch, out);
  for (int64_t j = 0; j < k; ++j) seen[static_cast<size_t>(out[j])] = 0;
}

// A row's blocks given the previous row's (prev, prev_k of them): each kept
// with probability `share`, the rest drawn from [0, v) without repeats, then
// shuffled into an unsorted top-k's random order. k <= v, and every block of
// prev is < v (visibility only grows along a request's rows).
void shared_blocks(const CounterRng& rng, uint64_t row, int64_t v, int64_t k, double share, const int32_t* prev,
                   int64_t prev_k, std::vector<uint8_t>& seen, std::vector<int32_t>& scratch, int32_t* out) {
  uint64_t draw = row << 32;
  if (static_cast<int64_t>(seen.size()) < v) seen.resize(static_cast<size_t>(v));
  int64_t n = 0;
  for (int64_t j = 0; j < prev_k && n < k; ++j)
    if (rng.uniform(draw++) < share) {
      seen[static_cast<size_t>(prev[j])] = 1;
      out[n++] = prev[j];
    }
  draw_distinct(rng, draw, v, k, n, seen, scratch, out);
  for (int64_t j = k - 1; j > 0; --j)
    std::swap(out[j], out[static_cast<int64_t>(rng.bits(draw++) % static_cast<uint64_t>(j + 1))]);
  for (int64_t j = 0; j < k; ++j) seen[static_cast<size_t>(out[j])] = 0;
}

}  // namespace

double parse_selection_share(const std::string& text) {
  size_t used = 0;
  double share = 0.0;
  try {
    share = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(share >= 0.0 && share <= 1.0))
    throw InputError("QSA_BENCH_SHARE=" + text + ": expected the share of the previous row's blocks, in [0, 1]");
  return share;
}

int64_t pages_per_request(const QsaConfig& c, const StepShape& s) {
  int64_t most = 1;
  for (const RequestChunk& q : s.requests) most = std::max(most, (q.seq_len() + c.page_size - 1) / c.page_size);
  return most;
}

PagePool make_page_pool(int64_t pages_wanted, int64_t max_pages, bool shuffled, uint64_t seed) {
  PagePool pool;
  pool.pages = std::max<int64_t>(1, std::min(pages_wanted, max_pages));
  pool.order.resize(static_cast<size_t>(pool.pages));
  for (int64_t i = 0; i < pool.pages; ++i) pool.order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (shuffled) {
    const CounterRng rng(seed, "bench.pages");
    for (int64_t i = pool.pages - 1; i > 0; --i)
      std::swap(pool.order[static_cast<size_t>(i)],
                pool.order[static_cast<size_t>(rng.bits(static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1))]);
  }
  return pool;
}

BatchMetadata make_batch_metadata(const QsaConfig& c, const StepShape& s, const PagePool& pool, int copy,
                                  uint64_t seed, Want want, double share) {
  if (!(share >= 0.0 && share <= 1.0))
    throw InputError("batch metadata: share " + std::to_string(share) + " is outside [0, 1]");
  BatchMetadata m;
  const int R = static_cast<int>(s.requests.size());
  const int64_t T = s.rows();
  const int64_t ppr = pages_per_request(c, s);
  const int kb = c.blocks_budget();
  m.block_table = TensorI32({R, ppr}, -1);
  for (int i = 0; i < R; ++i) {
    const RequestChunk& q = s.requests[static_cast<size_t>(i)];
    m.seq_lens.push_back(static_cast<int32_t>(q.seq_len()));
    const int64_t pages = (q.seq_len() + c.page_size - 1) / c.page_size;
    for (int64_t j = 0; j < pages; ++j) {
      const int64_t logical = (int64_t{copy} * R + i) * ppr + j;
      m.block_table.at(i, j) = pool.order[static_cast<size_t>(logical % pool.pages)];
    }
    for (int64_t p = q.context; p < q.seq_len(); ++p) {
      m.token_to_req.push_back(i);
      m.pos.push_back(p);
      m.visible.push_back(visible_blocks(p, q.seq_len(), c.compress_ratio));
    }
  }
  if (want == Want::kTables) return m;

  m.block_ids = TensorI32({T, kb}, -1);
  const CounterRng rng(seed, "bench.selection." + std::to_string(copy));
  if (share == 0.0) {  // independent rows: the selections of every run before QSA_BENCH_SHARE
#pragma omp parallel
    {
      std::vector<uint8_t> seen;
      std::vector<int32_t> scratch;
#pragma omp for schedule(dynamic, 16)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t v = m.visible[static_cast<size_t>(t)];
        random_blocks(rng, static_cast<uint64_t>(t), v, std::min<int64_t>(v, kb), seen, scratch,
                      m.block_ids.row(t));
      }
    }
  } else {  // each request's rows in order, every row after the first from the one before it
    std::vector<int64_t> first(static_cast<size_t>(R) + 1, 0);
    for (int i = 0; i < R; ++i)
      first[static_cast<size_t>(i) + 1] = first[static_cast<size_t>(i)] + s.requests[static_cast<size_t>(i)].query_len;
#pragma omp parallel
    {
      std::vector<uint8_t> seen;
      std::vector<int32_t> scratch;
#pragma omp for schedule(dynamic, 1)
      for (int i = 0; i < R; ++i)
        for (int64_t t = first[static_cast<size_t>(i)]; t < first[static_cast<size_t>(i) + 1]; ++t) {
          const int64_t v = m.visible[static_cast<size_t>(t)];
          const int64_t k = std::min<int64_t>(v, kb);
          if (t == first[static_cast<size_t>(i)]) {
            random_blocks(rng, static_cast<uint64_t>(t), v, k, seen, scratch, m.block_ids.row(t));
          } else {
            const int64_t prev_k = std::min<int64_t>(m.visible[static_cast<size_t>(t) - 1], kb);
            shared_blocks(rng, static_cast<uint64_t>(t), v, k, share, m.block_ids.row(t - 1), prev_k, seen, scratch,
                          m.block_ids.row(t));
          }
        }
    }
  }
  if (want == Want::kBlockIds) return m;

  const ExpandParams ep = make_expand_params(c);
  m.token_idx = TensorI32({T, ep.width()}, -1);
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t t = 0; t < T; ++t)
    expand_row(ep, m.block_ids.row(t), kb, m.pos[static_cast<size_t>(t)], m.token_idx.row(t));

  // Distinct attended tokens per request (the attention cost's KV term).
  const int64_t id_cols = c.row_width();  // never the count column
  int64_t row = 0;
  for (int i = 0; i < R; ++i) {
    const RequestChunk& q = s.requests[static_cast<size_t>(i)];
    std::vector<uint8_t> hit(static_cast<size_t>(q.seq_len()), 0);
    for (int64_t r = 0; r < q.query_len; ++r, ++row)
      for (int64_t col = 0; col < id_cols; ++col) {
        const int32_t id = m.token_idx.at(row, col);
        if (id >= 0 && id < q.seq_len() && !hit[static_cast<size_t>(id)]) {
          hit[static_cast<size_t>(id)] = 1;
          ++m.unique_kv_tokens;
        }
      }
  }
  return m;
}

}  // namespace qsa::bench
