#include "reference/core/step_layout.hpp"

#include <fmt/format.h>

#include <limits>
#include <unordered_map>

#include "reference/core/errors.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa {

int64_t paged_slot(const TensorI32& block_table, int req, int64_t p, int page_size) {
  const int64_t page = p / page_size;
  if (p < 0 || page >= block_table.dim(1)) return -1;
  const int32_t phys = block_table.at(req, page);
  return phys < 0 ? -1 : int64_t{phys} * page_size + p % page_size;
}

bool slot_ids_fit_int32(int64_t num_pages, int page_size) {
  return page_size >= 1 && num_pages >= 0 && num_pages <= std::numeric_limits<int32_t>::max() / page_size;
}

void token_slots(const TensorI32& token_idx, bool count_column, const std::vector<int32_t>& token_to_req,
                 const std::vector<int32_t>& seq_lens, const TensorI32& block_table, int page_size,
                 int64_t num_pages, TensorI32& slots) {
  if (token_idx.rank() != 2) throw InputError("token_slots: token_idx must be [T, W]");
  const int64_t T = token_idx.dim(0), W = token_idx.dim(1);
  const auto R = static_cast<int64_t>(seq_lens.size());
  if (static_cast<int64_t>(token_to_req.size()) != T)
    throw InputError(fmt::format("token_slots: {} token_to_req entries for {} rows", token_to_req.size(), T));
  if (block_table.rank() != 2 || block_table.dim(0) != R)
    throw InputError(fmt::format("token_slots: block_table must be [{}, max_pages] (one row per request)", R));
  if (count_column && W < 1) throw InputError("token_slots: a count column needs a row width of at least 1");
  if (page_size < 1) throw InputError(fmt::format("token_slots: page size {} (must be >= 1)", page_size));
  if (!slot_ids_fit_int32(num_pages, page_size))
    throw InputError(fmt::format("token_slots: {} pages of {} slots do not fit int32 slot ids", num_pages,
                                 page_size));
  if (slots.empty()) {
    slots = TensorI32({T, W}, -1);
  } else {
    require_shape(slots, {T, W}, "token_slots");
  }
  const int64_t num_slots = num_pages * page_size;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t req = token_to_req[static_cast<size_t>(t)];
    if (req < -1 || req >= R)
      throw InputError(fmt::format("token_slots: row {} names request {} of {}", t, req, R));
    const int32_t* ids = token_idx.row(t);
    int32_t* out = slots.row(t);
    const int64_t n = attended_columns(ids, W, count_column);
    for (int64_t c = 0; c < W; ++c) {
      const int32_t id = ids[c];
      // paged_slot is -1 for a page beyond the table or unmapped; an entry
      // past num_pages gives a slot past num_slots.
      const int64_t slot = req >= 0 && c < n && id < seq_lens[static_cast<size_t>(req)]
                               ? paged_slot(block_table, req, id, page_size)
                               : -1;
      out[c] = slot < num_slots ? static_cast<int32_t>(slot) : -1;
    }
    if (count_column) out[W - 1] = ids[W - 1];
  }
}

int32_t visible_blocks(int64_t p, int64_t seq_len, int ratio) {
  if (p < 0) return 0;
  const int64_t v = std::min((p + 1) / ratio, seq_len / ratio);
  return static_cast<int32_t>(std::max<int64_t>(0, v));
}

namespace {

void check_table(const TensorI32& table, int num_reqs, int64_t num_pages, const char* name) {
  if (table.rank() != 2 || table.dim(0) != num_reqs)
    throw InputError(fmt::format("{} has shape {}, expected [{}, max_pages]", name,
                                 shape_to_string(table.shape), num_reqs));
  for (int64_t i = 0; i < table.dim(0); ++i)
    for (int64_t j = 0; j < table.dim(1); ++j) {
      const int32_t v = table.at(i, j);
      if (v < -1 || v >= num_pages)
        throw InputError(fmt::format("{}[{}, {}] = {} is out of range (cache has {} pages; -1 marks "
                                     "an unmapped page)",
                                     name, i, j, v, num_pages));
    }
}

// Positions as [T], [1, T] or [3, T] become [3, T].
TensorI64 rope_rows(const TensorI64& positions) {
  int64_t rows = 0, t = 0;
  if (positions.rank() == 1) {
    rows = 1;
    t = positions.dim(0);
  } else if (positions.rank() == 2 && (positions.dim(0) == 1 || positions.dim(0) == 3)) {
    rows = positions.dim(0);
    t = positions.dim(1);
  } else {
    throw InputError(fmt::format("positions has shape {}, expected [T], [1, T] or [3, T]",
                                 shape_to_string(positions.shape)));
  }
  TensorI64 out({3, t});
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t i = 0; i < t; ++i) out.at(a, i) = positions.data[(rows == 3 ? a : 0) * t + i];
  return out;
}

}  // namespace

StepLayout derive_step_layout(const QsaConfig& c, const CacheGeometry& g, const StepMetadata& m) {
  StepLayout l;
  if (m.query_start_loc.empty()) throw InputError("query_start_loc is empty; it needs R + 1 entries");
  const int R = static_cast<int>(m.query_start_loc.size()) - 1;
  l.num_reqs = R;
  if (static_cast<int>(m.seq_lens.size()) != R)
    throw InputError(fmt::format("seq_lens has {} entries, query_start_loc implies {} requests",
                                 m.seq_lens.size(), R));
  l.rope_pos = rope_rows(m.positions);
  const int64_t T = l.rope_pos.dim(1);
  l.num_tokens = T;
  if (m.query_start_loc[0] != 0)
    throw InputError(fmt::format("query_start_loc[0] = {}, must be 0", m.query_start_loc[0]));
  for (int i = 0; i < R; ++i) {
    // int64: hostile entries (INT32_MAX then INT32_MIN) must not overflow.
    const int64_t len = int64_t{m.query_start_loc[i + 1]} - m.query_start_loc[i];
    if (len < 1)
      throw InputError(fmt::format("query_start_loc is not increasing at request {} ({} -> {}); every "
                                   "request needs at least one token",
                                   i, m.query_start_loc[i], m.query_start_loc[i + 1]));
    if (m.seq_lens[i] < len)
      throw InputError(fmt::format("seq_lens[{}] = {} is shorter than the request's chunk of {} tokens",
                                   i, m.seq_lens[i], len));
  }
  l.num_valid_tokens = m.query_start_loc[R];
  if (l.num_valid_tokens > T)
    throw InputError(fmt::format("query_start_loc[{}] = {} exceeds the {} position columns", R,
                                 l.num_valid_tokens, T));
  if (g.num_pages <= 0 || g.num_ring_blocks <= 0)
    throw InputError(fmt::format("cache geometry needs pages and ring blocks (got {} and {})",
                                 g.num_pages, g.num_ring_blocks));

  check_table(m.block_table, R, g.num_pages, "block_table");
  l.block_table = m.block_table;
  if (m.block_table_c.empty()) {
    l.block_table_c = m.block_table;
  } else {
    check_table(m.block_table_c, R, g.num_pages, "block_table_c");
    l.block_table_c = m.block_table_c;
  }
  l.starts = m.query_start_loc;
  l.seq_lens = m.seq_lens;
  l.query_lens.resize(R);
  l.ring_blocks.resize(R);
  for (int i = 0; i < R; ++i) {
    l.query_lens[i] = m.query_start_loc[i + 1] - m.query_start_loc[i];
    const int64_t pages_needed = (int64_t{m.seq_lens[i]} + c.page_size - 1) / c.page_size;
    if (m.block_table.dim(1) < pages_needed)
      throw InputError(fmt::format("block_table row {} has {} pages, seq_lens[{}] = {} needs {}", i,
                                   m.block_table.dim(1), i, m.seq_lens[i], pages_needed));
    if (!m.ring_blocks.empty()) {
      if (static_cast<int>(m.ring_blocks.size()) != R)
        throw InputError(fmt::format("ring_blocks has {} entries for {} requests", m.ring_blocks.size(), R));
      l.ring_blocks[i] = m.ring_blocks[i];
    } else {
      l.ring_blocks[i] = m.block_table.at(i, 0);
    }
    if (l.ring_blocks[i] < 0 || l.ring_blocks[i] >= g.num_ring_blocks)
      throw InputError(fmt::format("ring block {} of request {} is out of range (there are {})",
                                   l.ring_blocks[i], i, g.num_ring_blocks));
    for (int j = 0; j < i; ++j)
      if (l.ring_blocks[j] == l.ring_blocks[i])
        throw InputError(fmt::format("requests {} and {} share ring block {}", j, i, l.ring_blocks[i]));
  }

  const int r = c.compress_ratio;
  const int C = c.ring_capacity();
  const int rows_per_page = c.compressed_rows_per_page();
  l.token_to_req.assign(T, -1);
  l.pos.assign(T, -1);
  l.visible_blocks.assign(T, 0);
  l.main_slot.assign(T, -1);
  l.ring_slot.assign(T, -1);
  l.compressed_slot.assign(T, -1);
  std::unordered_map<int64_t, int64_t> slot_owner;
  for (int i = 0; i < R; ++i) {
    const int64_t ctx = l.context_len(i);
    for (int64_t t = m.query_start_loc[i]; t < m.query_start_loc[i + 1]; ++t) {
      const int64_t off = t - m.query_start_loc[i];
      const int64_t p = ctx + off;
      l.token_to_req[t] = i;
      l.pos[t] = p;
      l.visible_blocks[t] = visible_blocks(p, m.seq_lens[i], r);
      for (int a = 0; a < 3; ++a)
        if (l.rope_pos.at(a, t) < 0)
          throw InputError(fmt::format("positions[{}, {}] = {} is negative for a real token of request {}",
                                       a, t, l.rope_pos.at(a, t), i));
      const int64_t slot = paged_slot(l.block_table, i, p, c.page_size);
      if (slot < 0)
        throw InputError(fmt::format("token {} (request {}, position {}) is written to logical page {}, "
                                     "which block_table leaves unmapped",
                                     t, i, p, p / c.page_size));
      auto [it, fresh] = slot_owner.emplace(slot, t);
      if (!fresh)
        throw InputError(fmt::format("tokens {} and {} are both written to main KV slot {}", it->second,
                                     t, slot));
      l.main_slot[t] = slot;
      if (off >= l.query_lens[i] - C) l.ring_slot[t] = int64_t{l.ring_blocks[i]} * C + p % C;
      if ((p + 1) % r == 0) {
        const int64_t b = p / r;
        const int64_t cslot = paged_slot(l.block_table_c, i, b, rows_per_page);
        if (cslot < 0)
          throw InputError(fmt::format("token {} completes compressed block {} of request {}, whose page "
                                       "{} is unmapped in block_table_c",
                                       t, b, i, b / rows_per_page));
        l.compressed_slot[t] = cslot;
      }
    }
  }
  for (int64_t t = l.num_valid_tokens; t < T; ++t)
    for (int a = 0; a < 3; ++a) l.rope_pos.at(a, t) = -1;

  if (!m.slot_mapping.empty()) {
    if (static_cast<int64_t>(m.slot_mapping.size()) != T)
      throw InputError(fmt::format("slot_mapping has {} entries for {} tokens", m.slot_mapping.size(), T));
    for (int64_t t = 0; t < T; ++t)
      if (m.slot_mapping[t] != l.main_slot[t])
        throw InputError(fmt::format("slot_mapping[{}] = {} disagrees with the block table, which gives {}",
                                     t, m.slot_mapping[t], l.main_slot[t]));
  }
  l.mtp_reuse = m.mtp_reuse;
  return l;
}

StepMetadata simple_step(const std::vector<int32_t>& context_lens,
                         const std::vector<int32_t>& query_lens, int32_t pages_per_req,
                         int64_t padding_rows) {
  StepMetadata m;
  const int R = static_cast<int>(query_lens.size());
  m.query_start_loc.push_back(0);
  for (int i = 0; i < R; ++i) {
    m.query_start_loc.push_back(m.query_start_loc.back() + query_lens[i]);
    m.seq_lens.push_back(context_lens[i] + query_lens[i]);
  }
  m.block_table = TensorI32({R, pages_per_req});
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < pages_per_req; ++j) m.block_table.at(i, j) = i * pages_per_req + j;
  const int64_t T = m.query_start_loc.back() + padding_rows;
  m.positions = TensorI64({T}, -1);
  for (int i = 0; i < R; ++i)
    for (int32_t o = 0; o < query_lens[i]; ++o) m.positions.at(m.query_start_loc[i] + o) = context_lens[i] + o;
  return m;
}

}  // namespace qsa
