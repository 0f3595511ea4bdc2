// The prefill sparse attention kernel: one block per (tile of consecutive
// rows of one request, KV group, head chunk), walking the tile's entries
// (sparse_attention_plan.hpp) 32 at a time. Phases: attention_prefill_tile.hpp.
#include <cstdint>
#include <string>

#include "gpu/attention/sparse_attention_prefill.hpp"

namespace qsa::gpu::attn {

namespace {

template <int D, int MAXP, class KvT>
__global__ void __launch_bounds__(kPrefillThreads) sparse_attention_prefill_kernel(PrefillArgs pa) {
  using Pv = PrefillPv<D, MAXP>;
  __shared__ __attribute__((aligned(16))) uint16_t q_s[MAXP][D + 8];  // read as 16-byte vectors
  __shared__ float s_s[MAXP][kSStride];  // logits, then PV weights
  __shared__ int64_t slot_s[kPrefillTile];  // -1 = no row of the tile attends the entry
  __shared__ uint32_t mask_s[kPrefillTile];
  __shared__ float m_s[MAXP], l_s[MAXP], alpha_s[MAXP];

  const KernelArgs& a = pa.k;
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t* tile = pa.tiles + static_cast<int64_t>(blockIdx.x) * 4;
  const int64_t row0 = tile[0];
  const int nrows = tile[1];
  int64_t e0 = tile[2];
  int64_t ne = tile[3];
  const int g = static_cast<int>(blockIdx.y) / a.head_chunks;
  const int chunk = static_cast<int>(blockIdx.y) % a.head_chunks;
  const int group = a.heads / a.kv_heads;
  const int h0 = g * group + chunk * pa.heads_per_block;
  const int hc = min(pa.heads_per_block, group - chunk * pa.heads_per_block);
  const int np = nrows * hc;
  // Cheap guards on the plan (the host builds and checks it): a tile outside
  // the step writes nothing, bad entry ranges attend nothing.
  if (row0 < 0 || nrows < 1 || nrows > pa.rows_per_tile || row0 + nrows > pa.num_tokens || np > MAXP) return;
  if (e0 < 0 || ne < 0 || e0 + ne > pa.num_entries) ne = 0;
  const int req = a.token_to_req[row0];
  const bool real = req >= 0 && req < a.num_reqs;
  const int64_t seq_len = real ? a.seq_lens[req] : 0;
  if (!real) ne = 0;
  uint32_t rows_ok = 0;  // rows of the tile that really belong to req
  for (int r = 0; r < nrows; ++r)
    if (a.token_to_req[row0 + r] == req) rows_ok |= 1u << r;

  for (int i = tid; i < MAXP * D; i += kPrefillThreads) {
    const int pair = i / D;
    const int d = i % D;
    q_s[pair][d] = pair < np ? a.q[((row0 + pair / hc) * a.heads + h0 + pair % hc) * D + d] : uint16_t{0};
  }
  if (tid < MAXP) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.0f;
    alpha_s[tid] = 1.0f;
  }
  __syncthreads();

  float acc[Pv::kPer][kVec];
#pragma unroll
  for (int i = 0; i < Pv::kPer; ++i)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] = 0.0f;

  for (int64_t base = e0; base < e0 + ne; base += kPrefillTile) {
    if (tid < kPrefillTile) {
      const int64_t e = base + tid;
      int64_t slot = -1;
      uint32_t mask = 0;
      if (e < e0 + ne) {
        mask = pa.masks[e] & rows_ok;
        if (mask != 0u) slot = resolve_slot(a, req, seq_len, pa.ids[e]);
        if (slot < 0) mask = 0;
      }
      slot_s[tid] = slot;
      mask_s[tid] = mask;
    }
    __syncthreads();
    prefill_logits<D, MAXP, KvT>(a, g, hc, np, q_s, slot_s, mask_s, s_s);
    // A barrier that also tells every thread whether the tile attends anything.
    if (!block_any(tid < kPrefillTile && mask_s[tid] != 0u)) continue;
    // the decode kernel's online softmax, over this kernel's tile width
    tile_softmax<kSStride, kPrefillTile>(a, np, s_s, m_s, l_s, alpha_s);
    __syncthreads();
    prefill_pv<D, MAXP, KvT>(a, g, hc, np, s_s, slot_s, mask_s, alpha_s, acc);
    __syncthreads();  // the next tile overwrites s_s, slot_s and mask_s
  }

  const int dc = tid % Pv::kDimThreads;
  const int pg = tid / Pv::kDimThreads;
#pragma unroll
  for (int i = 0; i < Pv::kPer; ++i) {
    const int pair = pg + i * Pv::kGroups;
    if (pair >= np) continue;  // compile-time indices keep acc in registers
    const int64_t head = (row0 + pair / hc) * a.heads + h0 + pair % hc;
    const float l = l_s[pair];
#pragma unroll
    for (int e = 0; e < kVec; ++e) store_output(a, head * D + dc * kVec + e, softmax_normalized(acc[i][e], l));
  }
}

template <int D, int MAXP, class KvT>
void launch_one(const PrefillArgs& pa, const SparseAttentionPrefillShape& shape, int64_t num_tiles,
                hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(num_tiles), static_cast<unsigned>(pa.k.kv_heads * shape.head_chunks));
  sparse_attention_prefill_kernel<D, MAXP, KvT><<<grid, kPrefillThreads, 0, stream>>>(pa);
  QSA_GPU_CHECK_LAUNCH();
}

template <int D, class KvT>
void dispatch_pairs(const PrefillArgs& pa, const SparseAttentionPrefillShape& shape, int64_t num_tiles,
                    hipStream_t stream) {
  static_assert(kAttentionPrefillMaxPairs == 64 && kAttentionPrefillEntries == kPrefillTile,
                "the instantiations below cover the plan's limits");
  if (shape.pairs <= 16) return launch_one<D, 16, KvT>(pa, shape, num_tiles, stream);
  return launch_one<D, 64, KvT>(pa, shape, num_tiles, stream);
}

template <class KvT>
void dispatch_dim(const PrefillArgs& pa, const SparseAttentionPrefillShape& shape, int64_t num_tiles, int head_dim,
                  hipStream_t stream) {
  switch (head_dim) {
    case 32: return dispatch_pairs<32, KvT>(pa, shape, num_tiles, stream);
    case 64: return dispatch_pairs<64, KvT>(pa, shape, num_tiles, stream);
    case 128: return dispatch_pairs<128, KvT>(pa, shape, num_tiles, stream);
    case 256: return dispatch_pairs<256, KvT>(pa, shape, num_tiles, stream);
    default: throw ConfigError("gpu attention: head_dim " + std::to_string(head_dim) + " has no prefill kernel");
  }
}

}  // namespace

void launch_prefill(const PrefillArgs& pa, const SparseAttentionPrefillShape& shape, int64_t num_tiles, int head_dim,
                    bool fp8, hipStream_t stream) {
  if (fp8)
    dispatch_dim<uint8_t>(pa, shape, num_tiles, head_dim, stream);
  else
    dispatch_dim<uint16_t>(pa, shape, num_tiles, head_dim, stream);
}

}  // namespace qsa::gpu::attn
