// The select kernels and their launcher. The phases live in
// select_scores.hpp (decode scores into the scratch row),
// select_prefill_scores.hpp (tiled prefill scores into the same scratch) and
// select_topk.hpp (radix select + bitonic sort); this file ties them into
// the decode kernel (both phases fused, one block per row), the prefill
// scoring kernel and the top-k kernel, and dispatches on the indexer dtype.
#include "gpu/select/select.hpp"

#include "gpu/select/select_args.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_prefill_scores.hpp"
#include "gpu/select/select_scores.hpp"
#include "gpu/select/select_topk.hpp"

namespace qsa::gpu {

namespace select_detail {

namespace {

// Writes ids[i], scores[i] for i < K_B: the k sorted winners, then -1 / -inf.
__device__ void write_row(const TopKShared& sh, int k, int blocks_budget, const float* scores,
                          int32_t visible, int32_t* ids_out, float* scores_out) {
  for (int i = static_cast<int>(threadIdx.x); i < blocks_budget; i += kSelectThreads) {
    if (i < k) {
      const uint32_t id = select_key_id(sh.keys[i]);
      ids_out[i] = static_cast<int32_t>(id);
      // id < visible always; the guard keeps a broken sort from reading past the row.
      scores_out[i] = id < static_cast<uint32_t>(visible) ? scores[id] : float_from_bits(kQuietNanBits);
    } else {
      ids_out[i] = -1;
      scores_out[i] = float_from_bits(0xFF800000u);  // -inf
    }
  }
}

// Phase 2 of row t over its scores (the scratch row, complete for b < visible,
// visible >= 1): the one top-k both paths run.
__device__ void topk_phase(const SelectArgs& a, int64_t t, int32_t visible, TopKShared& sh) {
  const float* scores = a.score_scratch + t * a.score_stride;
  const int k = visible < a.blocks_budget ? visible : a.blocks_budget;
  const uint64_t threshold = k < visible ? kth_largest_key(scores, visible, static_cast<uint32_t>(k), sh) : 0;
  gather_and_sort(scores, visible, threshold, k, sh);
  write_row(sh, k, a.blocks_budget, scores, visible, a.block_ids + t * a.blocks_budget,
            a.block_scores + t * a.blocks_budget);
}

// Decode path: both phases of one row per block.
template <CodeKind kKind, class Code>
__global__ void __launch_bounds__(kSelectThreads)
    select_decode_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a) {
  extern __shared__ float q_s[];  // [H_I * d_I], dynamic
  __shared__ TopKShared sh;

  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  if (visible == 0) {  // padding row or nothing visible: uniform over the block
    write_row(sh, 0, a.blocks_budget, nullptr, 0, a.block_ids + t * a.blocks_budget,
              a.block_scores + t * a.blocks_budget);
    return;
  }

  const int query_values = a.heads * a.dim;
  load_query_row<kKind>(index_q + t * query_values, query_values, q_s);
  __syncthreads();

  // Phase 1. The scratch row is written and re-read by this block only:
  // __syncthreads makes the global writes visible to the block's threads.
  const int32_t req = a.token_to_req[t];
  const PagedKeys keys{a.block_table_c + int64_t{req} * a.max_pages, a.max_pages, a.num_pages,
                       a.rows_per_page, a.dim};
  score_row<kKind>(q_s, compressed_keys, keys, a.heads, a.scale, visible, a.score_scratch + t * a.score_stride);
  __syncthreads();

  topk_phase(a, t, visible, sh);
}

// Prefill path, phase 1: one block per chunk of shape.rows rows.
template <CodeKind kKind, class Code>
__global__ void __launch_bounds__(kSelectThreads)
    select_prefill_score_kernel(const Code* index_q, const Code* compressed_keys, SelectArgs a,
                                SelectPrefillShape shape) {
  extern __shared__ float tiles_s[];  // q [rows, q_stride] then keys [keys, k_stride], dynamic
  __shared__ int32_t vis_s[kSelectPrefillMaxRows];
  __shared__ uint32_t ok_s[kSelectPrefillMaxKeys];
  score_prefill_chunk<kKind>(index_q, compressed_keys, a, shape, tiles_s,
                             tiles_s + static_cast<size_t>(shape.rows) * shape.q_stride, vis_s, ok_s);
}

// Prefill path, phase 2: one block per row over the scratch the scoring
// kernel wrote earlier on the same stream.
__global__ void __launch_bounds__(kSelectThreads) select_topk_kernel(SelectArgs a) {
  __shared__ TopKShared sh;
  const int64_t t = blockIdx.x;
  const int32_t visible = guarded_visible(a, t);
  if (visible == 0) {
    write_row(sh, 0, a.blocks_budget, nullptr, 0, a.block_ids + t * a.blocks_budget,
              a.block_scores + t * a.blocks_budget);
    return;
  }
  topk_phase(a, t, visible, sh);
}

template <CodeKind kKind, class Code>
void launch_kernels(const SelectLayout& l, const SelectPrefillShape* prefill, const void* index_q,
                    const void* compressed_keys, const SelectArgs& args, hipStream_t stream) {
  const unsigned rows = static_cast<unsigned>(l.rows);
  if (prefill == nullptr) {
    const size_t dynamic_shared =
        sizeof(float) * static_cast<size_t>(args.heads) * static_cast<size_t>(args.dim);
    select_decode_kernel<kKind, Code><<<rows, kSelectThreads, dynamic_shared, stream>>>(
        static_cast<const Code*>(index_q), static_cast<const Code*>(compressed_keys), args);
    QSA_GPU_CHECK_LAUNCH();
    return;
  }
  const int64_t chunks = (l.rows + prefill->rows - 1) / prefill->rows;
  select_prefill_score_kernel<kKind, Code>
      <<<static_cast<unsigned>(chunks), kSelectThreads, prefill->shared_bytes(), stream>>>(
          static_cast<const Code*>(index_q), static_cast<const Code*>(compressed_keys), args, *prefill);
  QSA_GPU_CHECK_LAUNCH();
  select_topk_kernel<<<rows, kSelectThreads, 0, stream>>>(args);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace

}  // namespace select_detail

void launch_select(const SelectParams& p, const IndexerCodes& codes, const SelectLayout& layout,
                   const void* index_q, const void* compressed_keys, const int32_t* token_to_req,
                   const int32_t* visible_blocks, const int32_t* block_table_c, float* score_scratch,
                   int32_t* block_ids, float* block_scores, hipStream_t stream, SelectPath path) {
  using namespace select_detail;
  static_assert(kMaxWinners == kSelectMaxBlocksBudget, "the sort buffer holds K_B keys");
  check_select_params(p, codes);
  check_select_layout(layout);
  if (path != SelectPath::kAuto && path != SelectPath::kDecode && path != SelectPath::kPrefill)
    throw ConfigError("launch_select: unknown select path");
  if (layout.rows == 0) return;
  if (index_q == nullptr || token_to_req == nullptr || visible_blocks == nullptr || block_ids == nullptr ||
      block_scores == nullptr)
    throw InputError("launch_select: a per-row device pointer is null");
  if (layout.max_visible > 0 && (compressed_keys == nullptr || score_scratch == nullptr || block_table_c == nullptr))
    throw InputError("launch_select: blocks are visible but the compressed cache, block table or score "
                     "scratch pointer is null");

  SelectArgs args{};
  args.token_to_req = token_to_req;
  args.visible_blocks = visible_blocks;
  args.block_table_c = block_table_c;
  args.score_scratch = score_scratch;
  args.block_ids = block_ids;
  args.block_scores = block_scores;
  args.rows = layout.rows;
  args.num_requests = layout.num_requests;
  args.max_pages = layout.max_pages;
  args.num_pages = layout.num_pages;
  args.rows_per_page = layout.rows_per_page;
  args.score_stride = layout.score_stride;
  args.heads = p.heads;
  args.dim = p.dim;
  args.blocks_budget = p.blocks_budget;
  args.scale = static_cast<float>(p.score_scale);

  const SelectPrefillShape shape = select_prefill_shape(p);
  const SelectPrefillShape* prefill =
      resolve_select_path(p, layout, path) == SelectPath::kPrefill ? &shape : nullptr;
  if (codes.dtype == IndexerDtype::kBf16) {
    launch_kernels<CodeKind::kBf16, uint16_t>(layout, prefill, index_q, compressed_keys, args, stream);
  } else if (codes.fp8_flavor == Fp8Flavor::kE4m3fnuz) {
    launch_kernels<CodeKind::kFp8Fnuz, uint8_t>(layout, prefill, index_q, compressed_keys, args, stream);
  } else {  // e4m3fn and its eager-NaN variant decode alike
    launch_kernels<CodeKind::kFp8Fn, uint8_t>(layout, prefill, index_q, compressed_keys, args, stream);
  }
}

}  // namespace qsa::gpu
