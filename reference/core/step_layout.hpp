// Step metadata (spec sections 4 and 10): what an engine passes for one step,
// and the per-token layout derived from it. derive_step_layout validates
// everything a trace could get wrong and throws InputError naming it.
//
// Rules pinned here (docs/semantics.md, "Batching"):
//  - Request i owns rows [query_start_loc[i], query_start_loc[i+1]); rows at
//    or past query_start_loc[R] are inert padding: token_to_req, pos,
//    rope_pos, slots are -1 and visible is 0.
//  - p = seq_len - query_len + offset, the request-relative logical position.
//    RoPE uses the given positions (which differ from p only under mRoPE).
//  - Main slot: block_table[req, p div P]·P + p mod P. A token written this
//    step must have a mapped page (entry >= 0); -1 marks an unmapped page.
//  - Ring slot: ring_block·C + p mod C, only for the last C tokens of each
//    request in the step; -1 otherwise.
//  - Compressed slot: for a token with (p+1) mod r == 0, the row of group
//    b = p div r at block_table_c[req, b div (P/r)]·(P/r) + b mod (P/r).
//  - Visible blocks V = max(0, min((p+1) div r, L div r)).
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/tensor.hpp"

namespace qsa {

// Sizes of the persistent caches a step runs against.
struct CacheGeometry {
  int64_t num_pages = 0;        // main KV pages of P tokens; the compressed cache has as
                                // many pages of P/r rows
  int64_t num_ring_blocks = 0;  // raw-key rings of C slots
};

struct StepMetadata {
  std::vector<int32_t> query_start_loc;  // [R + 1]
  std::vector<int32_t> seq_lens;         // [R] context plus this chunk
  TensorI32 block_table;                 // [R, max_pages], -1 = unmapped
  TensorI32 block_table_c;               // [R, max_pages] or empty: use block_table
  TensorI64 positions;                   // [T], [1, T] or [3, T]; RoPE positions
  std::vector<int32_t> ring_blocks;      // [R] or empty: block_table[req, 0]
  std::vector<int64_t> slot_mapping;     // [T] or empty; when given it must match the derived one
  bool mtp_reuse = false;                // MTP draft step >= 1: reuse the step-0 rows
};

struct StepLayout {
  int num_reqs = 0;
  int64_t num_tokens = 0;        // T, padding included
  int64_t num_valid_tokens = 0;  // query_start_loc[R]
  std::vector<int32_t> token_to_req;     // [T]
  std::vector<int64_t> pos;              // [T] logical position p
  TensorI64 rope_pos;                    // [3, T] (t, h, w); text rows are equal
  std::vector<int32_t> visible_blocks;   // [T]
  std::vector<int64_t> main_slot;        // [T]
  std::vector<int64_t> ring_slot;        // [T]
  std::vector<int64_t> compressed_slot;  // [T]
  std::vector<int32_t> query_lens;       // [R]
  std::vector<int32_t> seq_lens;         // [R] L
  std::vector<int32_t> ring_blocks;      // [R]
  TensorI32 block_table;                 // [R, max_pages]
  TensorI32 block_table_c;               // [R, max_pages_c]
  bool mtp_reuse = false;

  int32_t row_begin(int req) const { return query_start(req); }
  int32_t row_end(int req) const { return query_start(req) + query_lens[req]; }
  int64_t context_len(int req) const { return seq_lens[req] - query_lens[req]; }
  std::vector<int32_t> starts;  // [R + 1] query_start_loc

 private:
  int32_t query_start(int req) const { return starts[req]; }
};

StepLayout derive_step_layout(const QsaConfig& config, const CacheGeometry& geometry,
                              const StepMetadata& meta);

// Slot of request-relative token p through a block table, or -1 when its page
// is unmapped or beyond the table.
int64_t paged_slot(const TensorI32& block_table, int req, int64_t p, int page_size);

// Whether every slot of a main cache of num_pages pages of page_size tokens
// fits an int32 slot id (token_slots, the GPU's expand and the step driver
// all take slots as int32): page_size >= 1 and num_pages * page_size <= 2^31 - 1.
bool slot_ids_fit_int32(int64_t num_pages, int page_size);

// The main-cache slot of every id of token_idx that attention reads, by
// attention's rules (spec section 7): page = id div P, slot = block_table[
// req, page] * P + id mod P. A column holds -1 where attention reads nothing:
// the id is -1 or outside [0, seq_len) of the row's request, the column is
// past the count column's bound, the page is beyond the table's columns, or
// its entry is -1 or outside [0, num_pages); padding rows (token_to_req -1)
// are all -1. With count_column the last column is copied unchanged.
//   token_idx: [T, W]; token_to_req: [T], each in [-1, R); seq_lens: [R];
//   block_table: [R, max_pages] -> slots: [T, W] (resized when empty)
// InputError for shapes that disagree, a request out of range, page_size < 1
// or a cache whose num_pages * page_size slots do not fit int32.
void token_slots(const TensorI32& token_idx, bool count_column, const std::vector<int32_t>& token_to_req,
                 const std::vector<int32_t>& seq_lens, const TensorI32& block_table, int page_size,
                 int64_t num_pages, TensorI32& slots);

int32_t visible_blocks(int64_t p, int64_t seq_len, int ratio);

// Builds the metadata of a simple step for tests and examples: requests with
// the given context and query lengths, pages assigned consecutively from
// `first_page` with `pages_per_req` pages each, positions = p (one row).
StepMetadata simple_step(const std::vector<int32_t>& context_lens,
                         const std::vector<int32_t>& query_lens, int32_t pages_per_req,
                         int64_t padding_rows = 0);

}  // namespace qsa
