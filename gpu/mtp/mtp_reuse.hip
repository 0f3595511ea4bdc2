#include "gpu/mtp/mtp_reuse.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "gpu/common/bf16.hpp"

namespace qsa::gpu {

namespace {

// One block per row; rows beyond the grid (65535 blocks, within every
// vendor's limit) are taken in a grid-stride loop. Threads stride over the
// columns, so a row of any width is coalesced.
constexpr int kMtpThreads = 128;
constexpr int64_t kMaxBlocks = 65535;

struct SaveArgs {
  int num_reqs;
  int blocks_budget;
  int width;
  const int32_t* last_row;
  const int32_t* block_ids;
  const float* block_scores;
  const int32_t* token_idx;
  int32_t* saved_ids;
  float* saved_scores;
  int32_t* saved_idx;
};

struct ReuseArgs {
  int64_t num_tokens;
  int blocks_budget;
  int width;
  bool count_column;
  const int32_t* token_to_req;
  const int32_t* saved_ids;
  const float* saved_scores;
  const int32_t* saved_idx;
  int32_t* block_ids;
  float* block_scores;
  int32_t* token_idx;
};

// Scores travel as plain loads and stores (no arithmetic), so every bit,
// NaN payloads and -inf included, arrives as the select kernel wrote it.
__global__ void __launch_bounds__(kMtpThreads) mtp_save_kernel(SaveArgs a) {
  const int tid = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  for (int64_t i = blockIdx.x; i < a.num_reqs; i += gridDim.x) {
    const int64_t src = a.last_row[i];
    if (src < 0) continue;  // rejected by validate_mtp_save; never read row -1
    for (int c = tid; c < a.blocks_budget; c += stride) {
      a.saved_ids[i * a.blocks_budget + c] = a.block_ids[src * a.blocks_budget + c];
      a.saved_scores[i * a.blocks_budget + c] = a.block_scores[src * a.blocks_budget + c];
    }
    for (int c = tid; c < a.width; c += stride) a.saved_idx[i * a.width + c] = a.token_idx[src * a.width + c];
  }
}

__global__ void __launch_bounds__(kMtpThreads) mtp_reuse_kernel(ReuseArgs a) {
  const int tid = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  const float neg_inf = bits_float(0xff800000u);
  for (int64_t t = blockIdx.x; t < a.num_tokens; t += gridDim.x) {
    const int64_t req = a.token_to_req[t];
    const bool real = req >= 0;
    for (int c = tid; c < a.blocks_budget; c += stride) {
      a.block_ids[t * a.blocks_budget + c] = real ? a.saved_ids[req * a.blocks_budget + c] : -1;
      a.block_scores[t * a.blocks_budget + c] = real ? a.saved_scores[req * a.blocks_budget + c] : neg_inf;
    }
    for (int c = tid; c < a.width; c += stride) {
      int32_t v = -1;
      if (real) v = a.saved_idx[req * a.width + c];
      else if (a.count_column && c == a.width - 1) v = 0;  // an inert row's loop bound
      a.token_idx[t * a.width + c] = v;
    }
  }
}

void check_shape(const char* what, int blocks_budget, int width, bool count_column) {
  if (blocks_budget < 1 || width < (count_column ? 2 : 1))
    throw ConfigError(std::string("gpu mtp ") + what + ": blocks_budget = " + std::to_string(blocks_budget) +
                      " and width = " + std::to_string(width) + ": need K_B >= 1 and a width of at least " +
                      (count_column ? "2 (ids and the count column)" : "1"));
}

void check_rows(const char* what, int64_t rows) {
  if (rows < 0 || rows > std::numeric_limits<int32_t>::max())
    throw InputError(std::string("gpu mtp ") + what + ": " + std::to_string(rows) +
                     " rows; need 0 <= rows < 2^31");
}

void check_pointers(const char* what, std::initializer_list<const void*> ptrs) {
  for (const void* ptr : ptrs)
    if (ptr == nullptr) throw InputError(std::string("gpu mtp ") + what + ": a device pointer is null");
}

unsigned grid_for(int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxBlocks)); }

}  // namespace

void launch_mtp_save(int num_reqs, int blocks_budget, int width, const int32_t* last_row, const int32_t* block_ids,
                     const float* block_scores, const int32_t* token_idx, int32_t* saved_ids, float* saved_scores,
                     int32_t* saved_idx, hipStream_t stream) {
  check_shape("save", blocks_budget, width, false);
  check_rows("save", num_reqs);
  if (num_reqs == 0) return;
  check_pointers("save", {last_row, block_ids, block_scores, token_idx, saved_ids, saved_scores, saved_idx});
  const SaveArgs args{num_reqs, blocks_budget, width,    last_row,     block_ids,
                      block_scores, token_idx, saved_ids, saved_scores, saved_idx};
  mtp_save_kernel<<<grid_for(num_reqs), kMtpThreads, 0, stream>>>(args);
  QSA_GPU_CHECK_LAUNCH();
}

void launch_mtp_reuse(int64_t num_tokens, int blocks_budget, int width, bool count_column,
                      const int32_t* token_to_req, const int32_t* saved_ids, const float* saved_scores,
                      const int32_t* saved_idx, int32_t* block_ids, float* block_scores, int32_t* token_idx,
                      hipStream_t stream) {
  check_shape("reuse", blocks_budget, width, count_column);
  check_rows("reuse", num_tokens);
  if (num_tokens == 0) return;
  check_pointers("reuse", {token_to_req, saved_ids, saved_scores, saved_idx, block_ids, block_scores, token_idx});
  const ReuseArgs args{num_tokens, blocks_budget, width,     count_column, token_to_req, saved_ids,
                       saved_scores, saved_idx,   block_ids, block_scores, token_idx};
  mtp_reuse_kernel<<<grid_for(num_tokens), kMtpThreads, 0, stream>>>(args);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
