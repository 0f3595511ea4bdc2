// Host-side checks of the select launcher: params within the kernel's limits,
// and every index the kernel follows (rows -> request -> page -> cache row)
// validated on the host copies, so no bad trace makes the kernel read out of
// bounds. Host code only; it lives in a .hip file so that the glob in
// gpu/CMakeLists.txt builds it into qsa_gpu. No fmt here: it keeps nvcc's
// host pass to the standard library.
#include <cmath>
#include <string>

#include "gpu/select/select.hpp"

namespace qsa::gpu {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

void check_select_params(const SelectParams& p, const IndexerCodes& codes) {
  if (p.heads < 1 || p.dim < 1)
    throw ConfigError("GPU select needs H_I >= 1 and d_I >= 1 (got H_I = " + str(p.heads) +
                      ", d_I = " + str(p.dim) + ")");
  if (p.blocks_budget < 1 || p.blocks_budget > kSelectMaxBlocksBudget)
    throw ConfigError("GPU select supports 1 <= K_B <= " + str(kSelectMaxBlocksBudget) + " (got K_B = " +
                      str(p.blocks_budget) + "): the winners are sorted in shared memory");
  if (int64_t{p.heads} * p.dim > kSelectMaxQueryValues)
    throw ConfigError("GPU select keeps the decoded query row in shared memory: H_I * d_I = " +
                      str(int64_t{p.heads} * p.dim) + " exceeds " + str(kSelectMaxQueryValues));
  if (!std::isfinite(p.score_scale))
    throw ConfigError("GPU select: the score scale s must be finite");
  if (codes.dtype != IndexerDtype::kBf16 && codes.dtype != IndexerDtype::kFp8)
    throw ConfigError("GPU select: unknown indexer dtype");
  if (codes.dtype == IndexerDtype::kFp8 && codes.fp8_flavor != Fp8Flavor::kE4m3fn &&
      codes.fp8_flavor != Fp8Flavor::kE4m3fnuz && codes.fp8_flavor != Fp8Flavor::kE4m3fnEagerNan)
    throw ConfigError("GPU select: unknown fp8 flavour");
}

void check_select_layout(const SelectLayout& l) {
  if (l.rows < 0 || l.num_requests < 0 || l.max_pages < 0 || l.num_pages < 0 || l.max_visible < 0)
    throw InputError("select layout has a negative size (rows " + str(l.rows) + ", requests " +
                     str(l.num_requests) + ", max_pages " + str(l.max_pages) + ", num_pages " +
                     str(l.num_pages) + ", max_visible " + str(l.max_visible) + ")");
  if (l.rows > INT32_MAX)
    throw InputError("select layout: " + str(l.rows) + " rows exceed one launch (2^31 - 1)");
  if (l.rows_per_page < 1)
    throw InputError("select layout: rows_per_page = " + str(l.rows_per_page) + " must be at least 1");
  if (l.score_stride < l.max_visible)
    throw InputError("select layout: score_stride = " + str(l.score_stride) +
                     " cannot hold the scores of max_visible = " + str(l.max_visible) + " blocks");
  // The tensor-core scorer reads a stand-in row (the cache's first) for an
  // unmapped block of a tile, so a visible block needs a cache with rows.
  if (l.max_visible > 0 && l.cache_rows() == 0)
    throw InputError("select layout: max_visible = " + str(l.max_visible) +
                     " blocks are visible but the compressed cache has no rows (num_pages = " + str(l.num_pages) + ")");
  // A row can only see blocks its table can map.
  if (int64_t{l.max_visible} > int64_t{l.max_pages} * l.rows_per_page)
    throw InputError("select layout: max_visible = " + str(l.max_visible) + " blocks exceed what " +
                     str(l.max_pages) + " pages of " + str(l.rows_per_page) + " rows can hold");
}

SelectPrefillShape select_prefill_shape(const SelectParams& p) {
  // Strides of odd length: consecutive key rows (and the query rows of
  // neighbouring pairs) start on different banks.
  SelectPrefillShape s;
  const int64_t qv = int64_t{p.heads} * p.dim;
  s.q_stride = static_cast<int>(qv % 2 == 0 ? qv + 1 : qv);
  s.k_stride = p.dim % 2 == 0 ? p.dim + 1 : p.dim;
  const int64_t budget = kSelectPrefillSharedBytes / static_cast<int64_t>(sizeof(float));
  s.keys = kSelectPrefillMaxKeys;
  const int64_t rows = (budget - int64_t{s.keys} * s.k_stride) / s.q_stride;
  if (rows >= 1) {
    s.rows = static_cast<int>(rows < kSelectPrefillMaxRows ? rows : kSelectPrefillMaxRows);
  } else {  // one query row, and as many keys as still fit (>= 1 for H_I * d_I <= 4096)
    s.rows = 1;
    const int64_t keys = (budget - s.q_stride) / s.k_stride;
    s.keys = static_cast<int>(keys < 1 ? 1 : keys);
  }
  return s;
}

SelectPath resolve_select_path(const SelectParams& p, const SelectLayout& layout, SelectPath path) {
  if (path != SelectPath::kAuto) return path;
  const int64_t rows = layout.real_rows > 0 ? layout.real_rows : layout.rows;
  const int64_t requests = layout.num_requests > 0 ? layout.num_requests : 1;
  const bool shared = rows >= kSelectPrefillMinRowsPerRequest * requests;
  return shared && select_prefill_shape(p).rows >= kSelectPrefillMinTileRows ? SelectPath::kPrefill
                                                                             : SelectPath::kDecode;
}

SelectLayout validate_select(const SelectParams& p, const IndexerCodes& codes, int64_t num_pages,
                             int rows_per_page, const std::vector<int32_t>& token_to_req,
                             const std::vector<int32_t>& visible_blocks, const TensorI32& block_table_c) {
  check_select_params(p, codes);
  if (block_table_c.rank() != 2)
    throw InputError("block_table_c has shape " + shape_to_string(block_table_c.shape) +
                     ", expected [R, max_pages]");
  if (block_table_c.dim(0) > INT32_MAX || block_table_c.dim(1) > INT32_MAX)
    throw InputError("block_table_c has shape " + shape_to_string(block_table_c.shape) + ": too large");
  SelectLayout l;
  l.rows = static_cast<int64_t>(token_to_req.size());
  l.num_requests = static_cast<int>(block_table_c.dim(0));
  l.max_pages = static_cast<int>(block_table_c.dim(1));
  l.num_pages = num_pages;
  l.rows_per_page = rows_per_page;
  if (static_cast<int64_t>(visible_blocks.size()) != l.rows)
    throw InputError("visible_blocks has " + str(static_cast<int64_t>(visible_blocks.size())) +
                     " entries for " + str(l.rows) + " rows (token_to_req)");
  if (num_pages < 0) throw InputError("num_pages = " + str(num_pages) + " is negative");
  if (rows_per_page < 1) throw InputError("rows_per_page = " + str(rows_per_page) + " must be at least 1");

  for (int64_t i = 0; i < block_table_c.numel(); ++i) {
    const int32_t page = block_table_c.data[i];
    if (page < -1 || page >= num_pages)
      throw InputError("block_table_c[" + str(i / (l.max_pages > 0 ? l.max_pages : 1)) + ", " +
                       str(l.max_pages > 0 ? i % l.max_pages : 0) + "] = " + str(page) +
                       " is not a page of the compressed cache ([-1, " + str(num_pages) + "))");
  }

  // Per request, the largest V of its rows: every page under it must be mapped.
  std::vector<int32_t> request_visible(static_cast<size_t>(l.num_requests), 0);
  for (int64_t t = 0; t < l.rows; ++t) {
    const int32_t req = token_to_req[t];
    const int32_t v = visible_blocks[t];
    if (req < -1 || req >= l.num_requests)
      throw InputError("token_to_req[" + str(t) + "] = " + str(req) + " is not a request ([-1, " +
                       str(l.num_requests) + "))");
    if (v < 0) throw InputError("visible_blocks[" + str(t) + "] = " + str(v) + " is negative");
    if (req < 0) {
      if (v != 0)
        throw InputError("padding row " + str(t) + " (token_to_req = -1) has visible_blocks = " + str(v) +
                         "; padding rows see no blocks");
      continue;
    }
    ++l.real_rows;
    if (v > request_visible[req]) request_visible[req] = v;
    if (v > l.max_visible) l.max_visible = v;
  }
  for (int req = 0; req < l.num_requests; ++req) {
    const int64_t v = request_visible[req];
    const int64_t pages_needed = (v + rows_per_page - 1) / rows_per_page;
    if (pages_needed > l.max_pages)
      throw InputError("request " + str(req) + " has a row that sees " + str(v) + " compressed blocks (" +
                       str(pages_needed) + " pages of " + str(rows_per_page) + ") but block_table_c has " +
                       str(l.max_pages) + " columns");
    for (int64_t page = 0; page < pages_needed; ++page)
      if (block_table_c.at(req, page) < 0)
        throw InputError("compressed block " + str(page * rows_per_page) + " of request " + str(req) +
                         " is visible but its page " + str(page) + " is unmapped in block_table_c");
  }
  l.score_stride = l.max_visible;
  check_select_layout(l);
  return l;
}

}  // namespace qsa::gpu
