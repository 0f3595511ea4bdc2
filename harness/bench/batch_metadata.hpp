// Host metadata of one benchmark input set, made the way the pipeline makes
// it: each request's logical pages mapped to physical pages of a pool, each
// row's selection a random set of min(V, K_B) distinct visible blocks in
// random order (as an unsorted top-k leaves them), and the token-index rows
// expanded from those selections by the reference's expand_row (so the
// attention benchmarks read ids of a causal context, tail included).
// Host code only: the GPU benchmarks use it, the CPU tests check it
// (tests/harness/batch_metadata_test.cpp).
//
// Selections of neighbouring rows (`share`, QSA_BENCH_SHARE): with 0 every
// row draws its blocks independently, the least cache-friendly case for a
// prefill chunk. With share s in (0, 1] a row keeps each block of the
// previous row of its request with probability s (all of them are visible to
// it: visibility grows with the position) and draws the rest at random from
// its other visible blocks. Neighbouring rows then share a fraction
// q = s + (1 - s)^2 K_B / (V - s K_B) of their blocks (the second term: new
// draws that hit the previous row's dropped blocks by chance), Jaccard
// q / (2 - q), and tiles of R rows reuse each loaded block at least
// R / (1 + (R - 1)(1 - s)) times: the numbers `qsa inspect --selections`
// measures on a recorded trace.
// A request's first row, and so every decode row, draws exactly as with 0.
//
// Page pools: input set `copy` maps logical page j of request i to
// order[((copy · R + i) · pages_per_request + j) mod pool pages], where
// `order` is a seeded permutation (QSA_BENCH_PAGES=consecutive: identity).
// Sets get disjoint pages while the pool holds them all; a pool capped by
// memory wraps, so requests then share physical pages (their selections
// still differ, so a launch rarely reads a byte twice).
#pragma once

#include <cstdint>
#include <string>
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
// random stream of the selections; `share` in [0, 1] as above (InputError
// otherwise).
BatchMetadata make_batch_metadata(const QsaConfig& c, const StepShape& s, const PagePool& pool, int copy,
                                  uint64_t seed, Want want, double share);

// QSA_BENCH_SHARE's value as a share in [0, 1]; InputError naming the
// variable for anything else (empty, trailing characters, NaN, out of range).
double parse_selection_share(const std::string& text);

}  // namespace qsa::bench
