// The decode path for p_rounding = kBf16Normalized (transformers eager):
// P = bf16(exp(S - m) / l) against the row's global max and sum, so a stats
// pass precedes the PV pass; sparse_attention_normalized.hpp describes the
// passes. The logits and the running (m, l) come from the decode kernel's
// own phases (attention_tile.hpp), so both passes see the same fp32 logits.
#include <cmath>
#include <cstdint>
#include <string>

#include "gpu/attention/sparse_attention_normalized.hpp"

namespace qsa::gpu::attn {

namespace {

// What one block of grid (row, g * head_chunks + chunk, split) covers.
struct SplitRange : SplitColumns {
  int64_t row;
  int g, h0, nh;  // KV group, first query head, heads of the chunk
};

// The decode kernel's row set-up (split_columns) and its head chunk.
__device__ inline SplitRange split_range(const KernelArgs& a, int max_heads) {
  SplitRange r;
  r.row = blockIdx.x;
  static_cast<SplitColumns&>(r) = split_columns(a, r.row, static_cast<int>(blockIdx.z));
  r.g = static_cast<int>(blockIdx.y) / a.head_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % a.head_chunks;
  const int group = a.heads / a.kv_heads;
  r.h0 = r.g * group + chunk * max_heads;
  r.nh = min(max_heads, group - chunk * max_heads);
  return r;
}

// Loads the chunk's queries (zeros past nh) and resets m = -inf, l = 0,
// alpha = 1; ends with a barrier.
template <int D, int MAXH>
__device__ void init_block(const KernelArgs& a, const SplitRange& r, float (*q_s)[D], float* m_s, float* l_s,
                           float* alpha_s) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int i = tid; i < MAXH * D; i += kThreads) {
    const int h = i / D;
    q_s[h][i % D] = h < r.nh ? bf16_to_float(a.q[(r.row * a.heads + r.h0 + h) * D + i % D]) : 0.0f;
  }
  if (tid < MAXH) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    alpha_s[tid] = 1.0f;
  }
  __syncthreads();
}

// The split's max m and sum l = sum exp(S - m) per head, by the decode
// kernel's tile_logits and tile_softmax (which also leaves weights in s_s
// and factors in alpha_s, unused here). Ends with a barrier.
template <int D, int MAXH, class KvT>
__device__ void split_stats(const KernelArgs& a, const SplitRange& r, const float (*q_s)[D], float (*s_s)[kTile],
                            float* m_s, float* l_s, float* alpha_s) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int base = r.begin; base < r.end; base += kTile) {
    const int c = base + tid;
    const int64_t slot = c < r.end ? resolve_slot(a, r.req, r.seq_len, r.ids[c]) : -1;
    tile_logits<D, MAXH, KvT>(a, r.g, slot, q_s, s_s);
    if (!block_any(slot >= 0)) continue;  // also the barrier before tile_softmax reads s_s
    tile_softmax(a, r.nh, s_s, m_s, l_s, alpha_s);
    __syncthreads();  // the next tile overwrites s_s
  }
}

template <int D, int MAXH, class KvT>
__global__ void __launch_bounds__(kThreads) normalized_stats_kernel(KernelArgs a) {
  __shared__ __attribute__((aligned(16))) float q_s[MAXH][D];
  __shared__ float s_s[MAXH][kTile];
  __shared__ float m_s[MAXH], l_s[MAXH], alpha_s[MAXH];
  const SplitRange r = split_range(a, MAXH);
  init_block<D, MAXH>(a, r, q_s, m_s, l_s, alpha_s);
  split_stats<D, MAXH, KvT>(a, r, q_s, s_s, m_s, l_s, alpha_s);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < r.nh) {
    const int64_t part = (r.row * a.heads + r.h0 + tid) * a.splits + blockIdx.z;
    a.ws_ml[part * 2] = m_s[tid];
    a.ws_ml[part * 2 + 1] = l_s[tid];
  }
}

// The PV weights of the tile in place: column tid of every head becomes
// bf16(expf(S - m) / l), as the reference's bf16(exp(S - max) / sum); ids
// not attended (S = -inf) and heads with no attended id (m = -inf) get 0.
template <int MAXH>
__device__ void tile_normalized_weights(const float* m_s, const float* l_s, float (*s_s)[kTile]) {
  const int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < MAXH; ++i) {
    const float m = m_s[i];
    const float s = s_s[i][tid];
    s_s[i][tid] = m == -INFINITY || s == -INFINITY ? 0.0f : round_bf16(expf(s - m) / l_s[i]);
  }
}

template <int D, int MAXH, class KvT>
__global__ void __launch_bounds__(kThreads) normalized_pv_kernel(KernelArgs a) {
  __shared__ __attribute__((aligned(16))) float q_s[MAXH][D];
  __shared__ float s_s[MAXH][kTile];  // logits, then PV weights
  __shared__ int64_t slot_s[kTile];   // -1 = id not attended
  __shared__ float m_s[MAXH], l_s[MAXH], alpha_s[MAXH];
  __shared__ float red_s[kThreads * kVec];

  const int tid = static_cast<int>(threadIdx.x);
  const SplitRange r = split_range(a, MAXH);
  init_block<D, MAXH>(a, r, q_s, m_s, l_s, alpha_s);
  if (a.splits == 1) {
    split_stats<D, MAXH, KvT>(a, r, q_s, s_s, m_s, l_s, alpha_s);
  } else if (tid < r.nh) {
    // The merge kernel's log-sum-exp over the splits' (m, l), in split order.
    const float* ml = a.ws_ml + (r.row * a.heads + r.h0 + tid) * a.splits * 2;
    float m = -INFINITY;
    for (int s = 0; s < a.splits; ++s) m = fmaxf(m, ml[s * 2]);
    float l = 0.0f;
    if (m != -INFINITY)
      for (int s = 0; s < a.splits; ++s) l += ml[s * 2 + 1] * expf(ml[s * 2] - m);
    m_s[tid] = m;
    l_s[tid] = l;
  }
  if (tid < MAXH) alpha_s[tid] = 1.0f;  // no rescale: the weights are final
  __syncthreads();

  float acc[MAXH][kVec];
#pragma unroll
  for (int i = 0; i < MAXH; ++i)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] = 0.0f;

  for (int base = r.begin; base < r.end; base += kTile) {
    const int c = base + tid;
    const int64_t slot = c < r.end ? resolve_slot(a, r.req, r.seq_len, r.ids[c]) : -1;
    slot_s[tid] = slot;
    tile_logits<D, MAXH, KvT>(a, r.g, slot, q_s, s_s);
    if (!block_any(slot >= 0)) continue;
    tile_normalized_weights<MAXH>(m_s, l_s, s_s);
    __syncthreads();
    tile_pv<D, MAXH, KvT>(a, r.g, min(kTile, r.end - base), s_s, slot_s, alpha_s, acc);
    __syncthreads();  // the next tile overwrites s_s and slot_s
  }
  reduce_lanes<D, MAXH>(r.nh, acc, red_s);

  constexpr int kDimThreads = D / kVec;
  if (tid >= kDimThreads) return;  // lane jl = 0 holds the sums
#pragma unroll
  for (int i = 0; i < MAXH; ++i) {
    if (i >= r.nh) continue;
    const int64_t head = r.row * a.heads + r.h0 + i;
    if (a.splits == 1) {
      for (int e = 0; e < kVec; ++e) store_output(a, head * D + tid * kVec + e, acc[i][e]);
    } else {
      const int64_t part = head * a.splits + blockIdx.z;
      for (int e = 0; e < kVec; ++e) a.ws_acc[part * D + tid * kVec + e] = acc[i][e];
    }
  }
}

// A = sum over splits of the partial PV sums, in split order (no weights:
// every split already used the row's m and l).
__global__ void __launch_bounds__(kThreads) normalized_sum_kernel(KernelArgs a, int head_dim) {
  const int64_t head = static_cast<int64_t>(blockIdx.x) * a.heads + blockIdx.y;
  for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += static_cast<int>(blockDim.x)) {
    float acc = 0.0f;
    for (int s = 0; s < a.splits; ++s) acc += a.ws_acc[(head * a.splits + s) * head_dim + d];
    store_output(a, head * head_dim + d, acc);
  }
}

template <int D, int MAXH, class KvT>
void launch_passes(const KernelArgs& a, int64_t rows, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(a.kv_heads * a.head_chunks),
                  static_cast<unsigned>(a.splits));
  if (a.splits > 1) {
    normalized_stats_kernel<D, MAXH, KvT><<<grid, kThreads, 0, stream>>>(a);
    QSA_GPU_CHECK_LAUNCH();
  }
  normalized_pv_kernel<D, MAXH, KvT><<<grid, kThreads, 0, stream>>>(a);
  QSA_GPU_CHECK_LAUNCH();
  if (a.splits > 1) {
    normalized_sum_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(a.heads)), kThreads, 0,
                            stream>>>(a, D);
    QSA_GPU_CHECK_LAUNCH();
  }
}

// The same head-chunk sizes as the decode kernel (the launcher's head_chunks).
template <int D, class KvT>
void dispatch_heads(const KernelArgs& a, int group, int64_t rows, hipStream_t stream) {
  if (group <= 1) return launch_passes<D, 1, KvT>(a, rows, stream);
  if (group <= 4) return launch_passes<D, 4, KvT>(a, rows, stream);
  return launch_passes<D, 16, KvT>(a, rows, stream);
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

}  // namespace

void launch_normalized(const KernelArgs& a, int head_dim, int group, int64_t rows, bool fp8, hipStream_t stream) {
  if (fp8)
    dispatch_dim<uint8_t>(a, head_dim, group, rows, stream);
  else
    dispatch_dim<uint16_t>(a, head_dim, group, rows, stream);
}

}  // namespace qsa::gpu::attn
