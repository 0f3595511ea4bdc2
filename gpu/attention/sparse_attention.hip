#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "gpu/attention/attention_tile.hpp"
#include "gpu/attention/sparse_attention.hpp"
#include "gpu/attention/sparse_attention_mma.hpp"
#include "gpu/attention/sparse_attention_normalized.hpp"
#include "gpu/attention/sparse_attention_prefill.hpp"
#include "gpu/common/dependent_launch.hpp"

namespace qsa::gpu {

namespace {

using attn::KernelArgs;
using attn::kThreads;
using attn::kTile;
using attn::kVec;

// Grid: x = row, y = g * head_chunks + chunk, z = split. See
// sparse_attention.hpp for the phases and attention_tile.hpp for each one.
template <int D, int MAXH, class KvT>
__global__ void __launch_bounds__(kThreads) sparse_attention_kernel(KernelArgs a) {
  static_assert(D % 8 == 0 && kThreads % (D / kVec) == 0, "head_dim must split into the thread layout");
  __shared__ __attribute__((aligned(16))) float q_s[MAXH][D];  // read as float4
  __shared__ float s_s[MAXH][kTile];  // logits, then PV weights
  __shared__ int64_t slot_s[kTile];   // -1 = id not attended
  __shared__ float m_s[MAXH], l_s[MAXH], alpha_s[MAXH];
  __shared__ float red_s[kThreads * kVec];

  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const int g = static_cast<int>(blockIdx.y) / a.head_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % a.head_chunks;
  const int split = static_cast<int>(blockIdx.z);
  const int group = a.heads / a.kv_heads;
  const int h0 = g * group + chunk * MAXH;  // first query head of this block
  const int nh = min(MAXH, group - chunk * MAXH);

  const attn::SplitColumns cols = attn::split_columns(a, row, split);
  const int32_t* ids = cols.ids;
  const int req = cols.req;
  const int64_t seq_len = cols.seq_len;
  const int begin = cols.begin, end = cols.end;

  for (int i = tid; i < MAXH * D; i += kThreads) {
    const int h = i / D;
    q_s[h][i % D] = h < nh ? bf16_to_float(a.q[(row * a.heads + h0 + h) * D + i % D]) : 0.0f;
  }
  if (tid < MAXH) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    alpha_s[tid] = 1.0f;
  }
  __syncthreads();

  float acc[MAXH][kVec];
#pragma unroll
  for (int i = 0; i < MAXH; ++i)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] = 0.0f;

  for (int base = begin; base < end; base += kTile) {
    const int c = base + tid;
    const int64_t slot = c < end ? attn::resolve_slot(a, req, seq_len, ids[c]) : -1;
    slot_s[tid] = slot;
    attn::tile_logits<D, MAXH, KvT>(a, g, slot, q_s, s_s);
    // A barrier that also tells every thread whether the tile attends anything.
    if (!block_any(slot >= 0)) continue;
    attn::tile_softmax(a, nh, s_s, m_s, l_s, alpha_s);
    __syncthreads();
    attn::tile_pv<D, MAXH, KvT>(a, g, min(kTile, end - base), s_s, slot_s, alpha_s, acc);
    __syncthreads();  // the next tile overwrites s_s and slot_s
  }
  attn::reduce_lanes<D, MAXH>(nh, acc, red_s);

  constexpr int kDimThreads = D / kVec;
  if (tid >= kDimThreads) return;  // lane jl = 0 holds the sums
#pragma unroll
  for (int i = 0; i < MAXH; ++i) {
    if (i >= nh) continue;  // compile-time indices keep acc in registers
    const int64_t head = row * a.heads + h0 + i;
    if (a.splits == 1) {
      const float l = l_s[i];
      for (int e = 0; e < kVec; ++e)
        attn::store_output(a, head * D + tid * kVec + e, attn::softmax_normalized(acc[i][e], l));
    } else {
      const int64_t part = head * a.splits + split;
      for (int e = 0; e < kVec; ++e) a.ws_acc[part * D + tid * kVec + e] = acc[i][e];
      if (tid == 0) {
        a.ws_ml[part * 2] = m_s[i];
        a.ws_ml[part * 2 + 1] = l_s[i];
      }
    }
  }
}

// Log-sum-exp merge of the splits of one (row, head): A = sum_s acc_s w_s /
// sum_s l_s w_s with w_s = exp(m_s - max m). Splits that attended nothing
// carry m = -inf (w = 0); a row where all did outputs 0.
//
// At small batch the merge is all latency (one row: 24 blocks on 132 SMs,
// each running this code once), so it costs one memory round trip per
// kMergeChunk splits and little code: the block stages a chunk's
// accumulators (16-byte loads, all in flight together) and its maxima and
// sums in shared memory, then every thread folds the chunk into its dims in
// split order, with the running max of the chunks before it (the online
// softmax rule; one chunk, as up to 40 splits are, is the plain formula).
// At one row this kernel's time is its instruction count (ncu), so each
// weight is computed once and the folding loops stay rolled: a fully
// unrolled variant with all its loads in one round trip had twice the
// instructions and measured 2 us slower (docs/performance.md, fifth pass).
// It is launched as a dependent of the attention kernel
// (dependent_launch.hpp): its blocks and gate loads overlap that kernel.
constexpr int kMergeDims = 2;     // dims per thread: head_dim <= kMergeDims * kThreads
constexpr int kMergeMaxDim = 256;
constexpr int kMergeChunk = 40;   // splits staged in shared memory at once
constexpr int kMergeLoads = kMergeChunk * kMergeMaxDim / 4 / kThreads;  // 16-byte loads per thread and chunk
static_assert(kMergeDims * kThreads >= kMergeMaxDim, "the widest head_dim (dispatch_dim) fits one block");

__global__ void __launch_bounds__(kThreads) merge_splits_kernel(KernelArgs a, int head_dim) {
  __shared__ __align__(16) float acc_s[kMergeChunk * kMergeMaxDim];  // [split][head_dim]
  __shared__ float m_s[kMergeChunk], l_s[kMergeChunk], w_s[kMergeChunk], lw_s[kMergeChunk];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t head = static_cast<int64_t>(blockIdx.x) * a.heads + blockIdx.y;
  const int splits = a.splits;
  uint16_t gate[kMergeDims];  // loaded before the stores below (store_gated)
#pragma unroll
  for (int j = 0; j < kMergeDims; ++j) {
    const int d = tid + j * kThreads;
    gate[j] = d < head_dim ? a.gate[head * head_dim + d] : 0;
  }
  wait_for_primary();  // the gates are older than the attention kernel; ws_* are its output
  allow_dependent_launch();  // the next kernel (a dependent launch) may get its blocks ready
  // The launcher checks that ws_acc is 16-byte aligned; head_dim is a multiple of 4.
  const float* ml = a.ws_ml + head * splits * 2;
  const float* acc_in = a.ws_acc + head * splits * head_dim;
  float m = -INFINITY, l = 0.0f, acc[kMergeDims] = {};
  for (int c0 = 0; c0 < splits; c0 += kMergeChunk) {  // uniform: so are the barriers
    const int cn = min(kMergeChunk, splits - c0);
    const int quads = cn * head_dim / 4;
    const float4* src = reinterpret_cast<const float4*>(acc_in + static_cast<int64_t>(c0) * head_dim);
    float4 v[kMergeLoads];
#pragma unroll
    for (int k = 0; k < kMergeLoads; ++k)
      if (tid + k * kThreads < quads) v[k] = src[tid + k * kThreads];
    float mt = -INFINITY, lt = 0.0f;
    if (tid < cn) {
      mt = ml[(c0 + tid) * 2];
      lt = ml[(c0 + tid) * 2 + 1];
    }
    __syncthreads();  // the previous chunk is folded
#pragma unroll
    for (int k = 0; k < kMergeLoads; ++k)
      if (tid + k * kThreads < quads) reinterpret_cast<float4*>(acc_s)[tid + k * kThreads] = v[k];
    if (tid < cn) {
      m_s[tid] = mt;
      l_s[tid] = lt;
    }
    __syncthreads();
    float m_new = m;
#pragma unroll 4
    for (int s = 0; s < cn; ++s) m_new = fmaxf(m_new, m_s[s]);
    if (m_new == -INFINITY) continue;  // nothing attended yet (the same in every thread)
    // Each split's weight once, by one thread (an empty split, m_s = -inf,
    // weighs 0); every thread then folds with shared-memory loads only.
    if (tid < cn) {
      const float w = expf(m_s[tid] - m_new);
      w_s[tid] = w;
      lw_s[tid] = l_s[tid] * w;
    }
    __syncthreads();
    // The chunks before this one, rescaled to the new max (zeros at the first
    // attended chunk, where m = -inf).
    const float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    l *= alpha;
#pragma unroll
    for (int j = 0; j < kMergeDims; ++j) acc[j] *= alpha;
#pragma unroll 4
    for (int s = 0; s < cn; ++s) {
      const float w = w_s[s];
      l += lw_s[s];
#pragma unroll
      for (int j = 0; j < kMergeDims; ++j) {
        const int d = tid + j * kThreads;
        if (d < head_dim) acc[j] += acc_s[s * head_dim + d] * w;
      }
    }
    m = m_new;
  }
#pragma unroll
  for (int j = 0; j < kMergeDims; ++j) {
    const int d = tid + j * kThreads;
    if (d < head_dim) attn::store_gated(a, head * head_dim + d, attn::softmax_normalized(acc[j], l), gate[j]);
  }
}

template <int D, int MAXH, class KvT>
void launch_main(const KernelArgs& a, int64_t rows, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(a.kv_heads * a.head_chunks),
                  static_cast<unsigned>(a.splits));
  sparse_attention_kernel<D, MAXH, KvT><<<grid, kThreads, 0, stream>>>(a);
  QSA_GPU_CHECK_LAUNCH();
}

template <int D, class KvT>
void dispatch_heads(const KernelArgs& a, int group, int64_t rows, hipStream_t stream) {
  if (group <= 1) return launch_main<D, 1, KvT>(a, rows, stream);
  if (group <= 4) return launch_main<D, 4, KvT>(a, rows, stream);
  return launch_main<D, 16, KvT>(a, rows, stream);
}

template <class KvT>
void dispatch_dim(const KernelArgs& a, int dim, int group, int64_t rows, hipStream_t stream) {
  switch (dim) {
    case 32: return dispatch_heads<32, KvT>(a, group, rows, stream);
    case 64: return dispatch_heads<64, KvT>(a, group, rows, stream);
    case 128: return dispatch_heads<128, KvT>(a, group, rows, stream);
    case 256: return dispatch_heads<256, KvT>(a, group, rows, stream);
    default: throw ConfigError("gpu attention: head_dim " + std::to_string(dim) + " has no kernel");
  }
}

int max_heads_for(int group) { return group <= 1 ? 1 : group <= 4 ? 4 : 16; }

// Split-K partials live in the caller's workspace: [T, H, a.splits, D]
// accumulators, then [T, H, a.splits, 2] (m, l).
void set_workspace(KernelArgs& a, const SparseAttentionArgs& args, const SparseAttentionDims& dims,
                   const AttentionParams& p) {
  if (a.splits == 1) return;
  a.ws_acc = args.workspace;
  a.ws_ml = args.workspace + static_cast<size_t>(dims.num_tokens) * p.heads * a.splits * p.head_dim;
}

void launch_merge(const KernelArgs& a, const SparseAttentionDims& dims, int head_dim, hipStream_t stream) {
  launch_dependent(merge_splits_kernel, dim3(static_cast<unsigned>(dims.num_tokens), static_cast<unsigned>(a.heads)),
                   dim3(kThreads), stream, a, head_dim);
}

void require_aligned(const void* ptr, const char* what) {
  if (!is_aligned(ptr, 16))
    throw InputError(std::string("gpu attention: ") + what + " must be 16-byte aligned");
}

}  // namespace

bool tensor_core_attention_available(const AttentionParams& p) {
  return p.kv_heads > 0 && attn::mma_decode_params_supported(p.head_dim, p.heads / p.kv_heads, p.p_rounding);
}

namespace {

// The spread decode kernel's shape where `path` takes it for `rows` rows
// of p with `workspace_floats` of workspace (spread_attention_size's rule);
// {0, 0} where the launch takes another kernel.
attn::SpreadDecodeShape spread_shape(const AttentionParams& p, KvDtype kv, int64_t rows, AttentionPath path,
                                     size_t workspace_floats) {
  if (kv != KvDtype::kBf16 || !tensor_core_attention_available(p) || rows < 1) return {};
  if (path != AttentionPath::kAuto && path != AttentionPath::kDecode && path != AttentionPath::kDecodeSpread)
    return {};
  const int64_t pairs = rows * p.kv_heads;
  if (path != AttentionPath::kDecodeSpread && pairs > kSpreadDecodeMaxPairs) return {};
  const int max_blocks =
      static_cast<int>(std::min<size_t>(workspace_floats / spread_workspace_floats_per_block(p, rows), 65535));
  return attn::spread_decode_shape(pairs, sparse_attention_columns(p), p.head_dim, p.heads / p.kv_heads, max_blocks);
}

}  // namespace

AttentionPath resolve_attention_path(const SparseAttentionDims& dims, const SparseAttentionArgs& args,
                                     AttentionPath path) {
  if (path != AttentionPath::kAuto) return path;
  const bool plan = args.prefill_tiles != nullptr && args.prefill_num_tiles > 0;
  return plan && dims.num_tokens >= kAttentionPrefillMinRowsPerTile * args.prefill_num_tiles ? AttentionPath::kPrefill
                                                                                              : AttentionPath::kDecode;
}

int tensor_core_attention_splits(const AttentionParams& p, KvDtype kv, int64_t rows, int ids_per_split) {
  if (!tensor_core_attention_available(p)) return 0;
  return attn::mma_decode_splits(rows * p.kv_heads, sparse_attention_columns(p),
                                 sparse_attention_splits(p, ids_per_split), p.head_dim, kv == KvDtype::kFp8);
}

int spread_attention_size(const AttentionParams& p, KvDtype kv, int64_t rows, AttentionPath path,
                          size_t workspace_floats) {
  return spread_shape(p, kv, rows, path, workspace_floats).blocks;
}

bool tensor_core_prefill_available(const AttentionParams& p, KvDtype kv) {
  return attn::mma_prefill_params_supported(p.head_dim, p.p_rounding == PRounding::kBf16Unnormalized,
                                            kv == KvDtype::kFp8);
}

double sparse_attention_prefill_min_reuse(const AttentionParams& p, KvDtype kv) {
  const bool hopper = attn::wgmma_prefill_params_supported(
      p.head_dim, p.p_rounding == PRounding::kBf16Unnormalized, kv == KvDtype::kFp8);
  return hopper ? kAttentionPrefillMinReuseHopper : kAttentionPrefillMinReuse;
}

bool auto_may_take_prefill(const AttentionParams& p, KvDtype kv) {
  return p.p_rounding != PRounding::kBf16Normalized &&
         (!tensor_core_attention_available(p) || tensor_core_prefill_available(p, kv));
}

AttentionPath resolve_attention_path(const AttentionParams& p, KvDtype kv, const SparseAttentionDims& dims,
                                     const SparseAttentionArgs& args, AttentionPath path) {
  if (p.p_rounding != PRounding::kBf16Normalized) {
    // The tensor-core decode kernel takes the same time whatever the rows
    // share; the union kernels' time falls with the plan's reuse
    // (sparse_attention_prefill_min_reuse says where they win). The portable
    // prefill kernel is slower than the tensor-core decode one at any reuse.
    if (path == AttentionPath::kAuto && tensor_core_attention_available(p)) {
      const double need = sparse_attention_prefill_min_reuse(p, kv) * static_cast<double>(args.prefill_num_entries);
      const bool reuse = args.prefill_num_entries > 0 && static_cast<double>(args.prefill_row_ids) >= need;
      return reuse && tensor_core_prefill_available(p, kv) ? resolve_attention_path(dims, args, path)
                                                           : AttentionPath::kDecode;
    }
    return resolve_attention_path(dims, args, path);
  }
  if (is_prefill_path(path))
    throw ConfigError("gpu attention: the prefill path does not implement p_rounding = bf16 normalised "
                      "(hf-eager); use the decode path (kAuto or kDecode)");
  return AttentionPath::kDecode;
}

namespace {

// The prefill path's own checks: a plan for these params that covers the step.
void check_prefill_args(const SparseAttentionPrefillShape& shape, const SparseAttentionDims& dims,
                        const SparseAttentionArgs& args) {
  if (args.prefill_tiles == nullptr || args.prefill_num_tiles < 1 ||
      (args.prefill_num_entries > 0 && (args.prefill_ids == nullptr || args.prefill_masks == nullptr)))
    throw InputError("gpu attention: the prefill path needs the plan of plan_sparse_attention_prefill in "
                     "SparseAttentionArgs::prefill_* (tiles, ids, masks and their counts)");
  if (args.prefill_rows_per_tile != shape.rows)
    throw InputError("gpu attention: the prefill plan has " + std::to_string(args.prefill_rows_per_tile) +
                     " rows per tile, these params need " + std::to_string(shape.rows) +
                     "; build the plan with the same params");
  if (args.prefill_num_entries < 0 || args.prefill_num_entries > 0x7fffffff ||
      args.prefill_num_tiles > dims.num_tokens || args.prefill_num_tiles > 0x7fffffff)
    throw InputError("gpu attention: the prefill plan (" + std::to_string(args.prefill_num_tiles) + " tiles, " +
                     std::to_string(args.prefill_num_entries) + " entries) does not fit " +
                     std::to_string(dims.num_tokens) + " rows");
}

}  // namespace

void launch_sparse_attention(const AttentionParams& p, const GateParams& gp, const KvCacheParams& kv,
                             const SparseAttentionDims& dims, const SparseAttentionArgs& args, hipStream_t stream,
                             int ids_per_split, AttentionPath path) {
  check_sparse_attention_params(p, kv);
  if (path != AttentionPath::kAuto && path != AttentionPath::kDecode && path != AttentionPath::kDecodePortable &&
      path != AttentionPath::kDecodeSplitK && path != AttentionPath::kDecodeSpread && !is_prefill_path(path))
    throw ConfigError("gpu attention: unknown attention path");
  const int splits = sparse_attention_splits(p, ids_per_split);
  if (dims.num_tokens == 0) return;
  if (dims.num_tokens < 0 || dims.num_tokens > 0x7fffffff || dims.num_reqs < 0 || dims.max_pages < 0 ||
      dims.num_pages != kv.num_pages)
    throw InputError("gpu attention: dims (T = " + std::to_string(dims.num_tokens) + ", R = " +
                     std::to_string(dims.num_reqs) + ", num_pages = " + std::to_string(dims.num_pages) +
                     ") do not describe this launch; take them from validate_sparse_attention");
  const AttentionPath resolved = resolve_attention_path(p, kv.dtype, dims, args, path);
  const bool prefill = is_prefill_path(resolved);
  const int group = p.heads / p.kv_heads;
  const SparseAttentionPrefillShape shape = sparse_attention_prefill_shape(p);
  const int head_chunks =
      prefill ? shape.head_chunks : (group + max_heads_for(group) - 1) / max_heads_for(group);
  if (static_cast<int64_t>(p.kv_heads) * head_chunks > 65535 || (!prefill && splits > 65535))
    throw InputError("gpu attention: " + std::to_string(p.kv_heads) + " KV heads and " + std::to_string(splits) +
                     " splits exceed the grid");
  if (prefill) {
    check_prefill_args(shape, dims, args);
  } else {
    const size_t need = sparse_attention_workspace_floats(p, dims, ids_per_split);
    if (args.workspace_floats < need || (need > 0 && args.workspace == nullptr))
      throw InputError("gpu attention: the workspace holds " + std::to_string(args.workspace_floats) +
                       " floats, the launch needs " + std::to_string(need));
    if (need > 0) require_aligned(args.workspace, "workspace");  // the split merge reads it in 16-byte vectors
  }
  for (auto [ptr, what] : {std::pair<const void*, const char*>{args.q, "q"}, {args.gate, "gate"},
                           {args.token_to_req, "token_to_req"}, {args.k_cache, "k_cache"}, {args.v_cache, "v_cache"},
                           {args.attn, "attn"}, {args.gated, "gated"}})
    if (ptr == nullptr) throw InputError(std::string("gpu attention: device pointer ") + what + " is null");
  if (p.index_width > 0 && args.token_idx == nullptr) throw InputError("gpu attention: token_idx is null");
  if (dims.num_reqs > 0 && (args.seq_lens == nullptr || (dims.max_pages > 0 && args.block_table == nullptr)))
    throw InputError("gpu attention: seq_lens or block_table is null");
  require_aligned(args.k_cache, "k_cache");  // read in 16- (bf16) and 8-byte (fp8) vectors
  require_aligned(args.v_cache, "v_cache");

  KernelArgs a{};
  a.heads = p.heads;
  a.kv_heads = p.kv_heads;
  a.head_chunks = head_chunks;
  a.index_width = p.index_width;
  a.page_size = p.page_size;
  a.max_pages = dims.max_pages;
  a.num_reqs = dims.num_reqs;
  a.splits = prefill ? 1 : splits;
  a.ids_per_split = ids_per_split;
  a.num_pages = kv.num_pages;
  a.count_column = p.count_column;
  a.round_logits = p.round_logits;
  a.round_p = p.p_rounding == PRounding::kBf16Unnormalized;
  a.round_output = p.round_output;
  a.round_sigmoid = gp.round_sigmoid;
  a.fnuz = kv.fp8_flavor == Fp8Flavor::kE4m3fnuz;
  a.scale = static_cast<float>(p.scale);
  a.k_scale = kv.dtype == KvDtype::kFp8 ? static_cast<float>(kv.k_scale) : 1.0f;
  a.v_scale = kv.dtype == KvDtype::kFp8 ? static_cast<float>(kv.v_scale) : 1.0f;
  a.q = args.q;
  a.gate = args.gate;
  a.token_idx = args.token_idx;
  a.token_slots = args.token_slots;
  a.token_to_req = args.token_to_req;
  a.seq_lens = args.seq_lens;
  a.block_table = args.block_table;
  a.k_cache = args.k_cache;
  a.v_cache = args.v_cache;
  a.attn = args.attn;
  a.gated = args.gated;

  if (prefill) {
    attn::PrefillArgs pa{};
    pa.k = a;
    pa.tiles = args.prefill_tiles;
    pa.ids = args.prefill_ids;
    pa.masks = args.prefill_masks;
    pa.num_tokens = dims.num_tokens;
    pa.num_entries = args.prefill_num_entries;
    pa.rows_per_tile = shape.rows;
    pa.heads_per_block = shape.heads;
    const bool fp8 = kv.dtype == KvDtype::kFp8;
    if (attn::mma_prefill_supported(a, p.head_dim, fp8)) {
      const bool wgmma = resolved == AttentionPath::kPrefill && attn::wgmma_prefill_supported(a, p.head_dim, fp8);
      attn::launch_mma_prefill(pa, args.prefill_num_tiles, p.head_dim, wgmma, stream);
      return;
    }
    attn::launch_prefill(pa, shape, args.prefill_num_tiles, p.head_dim, fp8, stream);
    return;
  }
  const bool fp8 = kv.dtype == KvDtype::kFp8;
  if (path != AttentionPath::kDecodePortable && p.p_rounding != PRounding::kBf16Normalized &&
      attn::mma_decode_supported(a, p.head_dim, group)) {
    const int cols = sparse_attention_columns(p);
    // A few rows: the spread kernel, one launch (sparse_attention_mma.hpp).
    const int64_t pairs = dims.num_tokens * p.kv_heads;
    const attn::SpreadDecodeShape spread =
        attn::spread_decode_supported(a, p.head_dim, group, fp8)
            ? spread_shape(p, kv.dtype, dims.num_tokens, path, args.workspace == nullptr ? 0 : args.workspace_floats)
            : attn::SpreadDecodeShape{};
    if (spread.blocks > 0) {
      a.splits = spread.blocks;
      a.ids_per_split = spread.ids;
      a.head_chunks = 1;
      a.ws_acc = args.workspace;  // [T, H, blocks, D] then [T, H, blocks, 2]
      a.ws_ml = args.workspace + static_cast<size_t>(dims.num_tokens) * p.heads * spread.blocks * p.head_dim;
      attn::launch_spread_decode(a, p.head_dim, dims.num_tokens, stream);
      return;
    }
    if (path == AttentionPath::kDecodeSpread)
      throw ConfigError("gpu attention: the spread decode kernel does not run here (it needs a bf16 cache, a "
                        "workspace for its partials and room for all " + std::to_string(pairs) +
                        " (row, KV group) pairs' blocks at once)");
    // The split-K kernel picks its own split count, never more than the
    // workspace sized for `splits` holds.
    const int want = tensor_core_attention_splits(p, kv.dtype, dims.num_tokens, ids_per_split);
    const int per = (cols + want - 1) / want;
    const int step = attn::mma_step_ids(fp8);
    a.ids_per_split = std::max(step, (per + step - 1) / step * step);
    a.splits = std::max(1, (cols + a.ids_per_split - 1) / a.ids_per_split);
    a.head_chunks = 1;
    set_workspace(a, args, dims, p);
    attn::launch_mma_decode(a, p.head_dim, dims.num_tokens, fp8, stream);
    if (a.splits > 1) launch_merge(a, dims, p.head_dim, stream);
    return;
  }
  if (path == AttentionPath::kDecodeSpread)
    throw ConfigError("gpu attention: the spread decode kernel needs the tensor-core kernel's conditions "
                      "(a CUDA build, bf16-unnormalised P, head_dim 64/128/256, H/G <= 16, aligned q, k and v)");
  set_workspace(a, args, dims, p);

  if (p.p_rounding == PRounding::kBf16Normalized) {
    attn::launch_normalized(a, p.head_dim, group, dims.num_tokens, kv.dtype == KvDtype::kFp8, stream);
    return;
  }
  if (fp8)
    dispatch_dim<uint8_t>(a, p.head_dim, group, dims.num_tokens, stream);
  else
    dispatch_dim<uint16_t>(a, p.head_dim, group, dims.num_tokens, stream);
  if (splits > 1) launch_merge(a, dims, p.head_dim, stream);
}

}  // namespace qsa::gpu
