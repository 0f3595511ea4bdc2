// Host metadata of one benchmark input set, made the way the pipeline makes
// it: each request's logical pages mapped to physical pages of a pool, each
// row's selection a random set of min(V, K_B) distinct visible blocks in
// random order (as an unsorted top-k leaves them), and the token-index rows
// expanded from those selections by the reference's expand_row (so the
// attention benchmarks read ids of a causal context, tail included).
//
// Page pools: input set `copy` maps logical page j of request i to
// order[((copy · R + i) · pages_per_request + j) mod pool pages], where
// `order` is a seeded permutation (QSA_BENCH_PAGES=consecutive: identity).
// Sets get disjoint pages while the pool holds them all; a pool capped by
// memory wraps, so requests then share physical pages (their selections
// still differ, so a launch rarely reads a byte twice).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/bench/cost_model.hpp"
#include "reference/core/config.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::bench {

struct PagePool {
  int64_t pages = 0;
  std::vector<int32_t> order;  // [pages]
};

// Largest ceil(L / P) of the shape's requests.
int64_t pages_per_request(const QsaConfig& c, const StepShape& s);

// A pool of min(pages_wanted, max_pages) pages (at least one).
PagePool make_page_pool(int64_t pages_wanted, int64_t max_pages, bool shuffled, uint64_t seed);

enum class Want { kTables, kBlockIds, kTokenIdx };

struct BatchMetadata {
  std::vector<int32_t> token_to_req;  // [T]
  std::vector<int64_t> pos;           // [T] request-relative position p
  std::vector<int32_t> visible;       // [T] V(p)
  std::vector<int32_t> seq_lens;      // [R]
  TensorI32 block_table;              // [R, pages_per_request]: main and compressed caches alike
  TensorI32 block_ids;                // [T, K_B] (Want >= kBlockIds)
  TensorI32 token_idx;                // [T, c.index_row_width()] (Want == kTokenIdx)
  int64_t unique_kv_tokens = 0;       // distinct (request, token) ids in token_idx
};

// Rows in request order (no padding rows); `copy` picks the pages and the
// random stream of the selections.
BatchMetadata make_batch_metadata(const QsaConfig& c, const StepShape& s, const PagePool& pool, int copy,
                                  uint64_t seed, Want want);

}  // namespace qsa::bench
