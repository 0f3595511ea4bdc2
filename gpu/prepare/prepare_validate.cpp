#include "gpu/prepare/prepare_validate.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <limits>
#include <string>
#include <unordered_map>

#include "reference/core/errors.hpp"

namespace qsa::gpu {

namespace {

[[noreturn]] void bad(const std::string& msg) { throw InputError("gpu prepare: " + msg); }

size_t at(int64_t i) { return static_cast<size_t>(i); }

template <class V>
void require_size(const V& v, int64_t n, const char* name) {
  if (static_cast<int64_t>(v.size()) != n) bad(fmt::format("{} has {} entries, expected {}", name, v.size(), n));
}

// Rows of request i lie in [starts[i], starts[i + 1]); the rest is padding.
void check_requests(const StepLayout& l, int64_t ring_blocks_total) {
  const int R = l.num_reqs;
  if (l.starts[0] != 0) bad(fmt::format("starts[0] = {}, must be 0", l.starts[0]));
  for (int i = 0; i < R; ++i) {
    if (l.starts[at(i + 1)] <= l.starts[at(i)])
      bad(fmt::format("starts is not strictly increasing at request {} ({} -> {})", i, l.starts[at(i)],
                      l.starts[at(i + 1)]));
    const int32_t rb = l.ring_blocks[at(i)];
    if (rb < 0 || rb >= ring_blocks_total)
      bad(fmt::format("ring_blocks[{}] = {} is out of range (the ring has {} blocks)", i, rb, ring_blocks_total));
    for (int j = 0; j < i; ++j)
      if (l.ring_blocks[at(j)] == rb) bad(fmt::format("requests {} and {} share ring block {}", j, i, rb));
  }
  if (l.starts[at(R)] > l.num_tokens)
    bad(fmt::format("starts[{}] = {} exceeds the {} rows", R, l.starts[at(R)], l.num_tokens));
}

void check_rows(const PrepareParams& p, const StepLayout& l) {
  const int R = l.num_reqs;
  const int r = p.compress.ratio, C = p.compress.ring_capacity;
  const int64_t kv_slots = p.kv.num_pages * p.kv.page_size;
  const int64_t comp_rows = p.kv.num_pages * p.compress.rows_per_page;
  std::unordered_map<int64_t, int64_t> kv_owner, comp_owner;
  for (int i = 0; i < R; ++i) {
    const int64_t begin = l.starts[at(i)], end = l.starts[at(i + 1)];
    const int64_t ctx = l.pos[at(begin)];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t p_t = l.pos[at(t)];
      if (l.token_to_req[at(t)] != i)
        bad(fmt::format("token_to_req[{}] = {}, but starts puts row {} in request {}", t, l.token_to_req[at(t)], t, i));
      if (p_t != ctx + (t - begin) || ctx < 0)
        bad(fmt::format("pos[{}] = {}: rows of request {} need consecutive positions from pos[{}] = {} >= 0", t, p_t,
                        i, begin, ctx));
      for (int a = 0; a < 3; ++a)
        if (l.rope_pos.at(a, t) < 0)
          bad(fmt::format("rope_pos[{}, {}] = {} is negative for a real row of request {}", a, t, l.rope_pos.at(a, t), i));
      const int64_t ms = l.main_slot[at(t)];
      if (ms < 0 || ms >= kv_slots)
        bad(fmt::format("main_slot[{}] = {} is out of range (the KV cache has {} slots)", t, ms, kv_slots));
      if (auto [it, fresh] = kv_owner.emplace(ms, t); !fresh)
        bad(fmt::format("main_slot: rows {} and {} both write KV slot {}", it->second, t, ms));
      const int64_t want_ring = end - t <= C ? int64_t{l.ring_blocks[at(i)]} * C + p_t % C : -1;
      if (l.ring_slot[at(t)] != want_ring)
        bad(fmt::format("ring_slot[{}] = {}, expected {} (ring block {} of C = {} slots, position {}, {} of request "
                        "{}'s last C rows)",
                        t, l.ring_slot[at(t)], want_ring, l.ring_blocks[at(i)], C, p_t,
                        want_ring < 0 ? "not one" : "one", i));
      const int64_t cs = l.compressed_slot[at(t)];
      if (cs < 0) continue;
      if ((p_t + 1) % r != 0)
        bad(fmt::format("compressed_slot[{}] = {} but position {} completes no group of r = {}", t, cs, p_t, r));
      if (cs >= comp_rows)
        bad(fmt::format("compressed_slot[{}] = {} is out of range (the compressed cache has {} rows)", t, cs, comp_rows));
      if (auto [it, fresh] = comp_owner.emplace(cs, t); !fresh)
        bad(fmt::format("compressed_slot: rows {} and {} both write compressed row {}", it->second, t, cs));
    }
  }
  for (int64_t t = l.starts[at(R)]; t < l.num_tokens; ++t)
    if (l.token_to_req[at(t)] != -1)
      bad(fmt::format("token_to_req[{}] = {} on a padding row (rows from starts[{}] = {} on must be -1)", t,
                      l.token_to_req[at(t)], R, l.starts[at(R)]));
}

// The one group per request that can straddle: it starts before the step's
// first position and completes inside the step.
void check_straddling_members(const PrepareParams& p, const StepLayout& l, const std::vector<int64_t>& ring_tags) {
  const int r = p.compress.ratio, C = p.compress.ring_capacity;
  for (int i = 0; i < l.num_reqs; ++i) {
    const int64_t begin = l.starts[at(i)], end = l.starts[at(i + 1)];
    const int64_t ctx = l.pos[at(begin)];
    const int64_t first = ctx / r * r, last = first + r - 1;
    if (first == ctx || last >= ctx + (end - begin)) continue;  // no group straddles, or it stays open
    if (l.compressed_slot[at(begin + (last - ctx))] < 0) continue;  // nothing pooled
    for (int64_t q = first; q < ctx; ++q) {
      const int64_t slot = int64_t{l.ring_blocks[at(i)]} * C + q % C;
      const int64_t held = ring_tags[at(slot)];
      if (held != q)
        bad(fmt::format("raw-key ring block {} slot {} holds position {} but pooling group {} of request {} needs "
                        "position {}: the member was {} (a group straddling a chunk boundary can only read the "
                        "last {} keys of earlier steps)",
                        l.ring_blocks[at(i)], slot, held, q / r, i, q, held < 0 ? "never written" : "overwritten", C));
    }
  }
}

}  // namespace

void validate_prepare(const PrepareParams& p, const StepLayout& l, const std::vector<int64_t>& ring_tags) {
  check_prepare_params(p);
  const int64_t T = l.num_tokens;
  const int R = l.num_reqs;
  if (T < 0 || R < 0) bad(fmt::format("negative sizes: {} rows, {} requests", T, R));
  if (T + R > std::numeric_limits<int32_t>::max())
    bad(fmt::format("{} rows and {} requests exceed one launch (2^31 - 1 blocks)", T, R));
  require_size(l.token_to_req, T, "token_to_req");
  require_size(l.pos, T, "pos");
  require_size(l.main_slot, T, "main_slot");
  require_size(l.ring_slot, T, "ring_slot");
  require_size(l.compressed_slot, T, "compressed_slot");
  require_size(l.starts, int64_t{R} + 1, "starts");
  require_size(l.ring_blocks, R, "ring_blocks");
  require_shape(l.rope_pos, {3, T}, "gpu prepare: rope_pos");
  const int C = p.compress.ring_capacity;
  if (ring_tags.size() % static_cast<size_t>(C) != 0)
    bad(fmt::format("the ring has {} slots, not a whole number of blocks of C = {}", ring_tags.size(), C));
  check_requests(l, static_cast<int64_t>(ring_tags.size()) / C);
  check_rows(p, l);
  check_straddling_members(p, l, ring_tags);
}

}  // namespace qsa::gpu
