// Phase 1 of the decode path: the fp32 scores of a chunk of consecutive
// blocks of one query row, keys read directly from the cache (the fused
// kernel, the scalar reader, and keys too long to stage), and the vector
// scorer the staged kernel shares (select_staged_scores.hpp). Device code,
// included by select.hip only.
//
// Thread i of a thread block scores blocks b0 + i + u · blockDim (u < kKeys)
// of its row, each one whole, from the decoded query in shared memory, with
// score_with's fma sequence (select_scores.hpp): the prefill path's bits.
// Two ways to read a key:
//  - vector (d_I % 16 == 0 and a 16-byte aligned cache, which the launcher
//    checks): kKeyBatch 16-byte loads per key in flight at once (from
//    global memory, or from the staged copy in shared memory), decoded in
//    registers; the kKeys keys of a thread share every float4 read of q
//    from shared memory (a broadcast: the whole wave reads one address), so
//    the loop issues one shared load per 4 · kKeys fmas per head;
//  - scalar: score_block, one code at a time (any d_I, any alignment).
// A block whose page is unmapped or out of range scores NaN (paged_row).
//
// Decoding an element must cost less than the H_I fmas that use it. bf16
// takes one shift or mask. fp8 by arithmetic (decode_code) takes about a
// dozen integer operations, and NVIDIA SMs issue integer work at half the
// fp32 rate: at H_I = 4 the fp8 scorer would be compute-bound well above
// its memory time. So the scoring kernel decodes fp8 through a 256-entry
// table in shared memory (Fp8TableDecoder), kFp8TableCopies copies
// interleaved so that lane l always reads bank l: one conflict-free shared
// load per element, and the table holds decode_code's own bits. (The fused
// kernel, for short rows only, keeps decode_code: TopKShared leaves no room.)
#pragma once

#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_scores.hpp"

namespace qsa::gpu::select_detail {

inline constexpr int kDecodeScoreThreads = 256;  // threads per block of the scoring kernel
inline constexpr int kDecodeKeysPerThread = 2;   // keys each thread scores at once
inline constexpr int kKeyBatch = 4;              // 16-byte vectors per key loaded before use

// Codes per 16-byte vector.
template <CodeKind kKind>
inline constexpr int kCodesPerVector = kKind == CodeKind::kBf16 ? 8 : 16;

// Shared-memory banks (32 four-byte banks on every supported GPU; this is
// the bank count, not the wave width).
inline constexpr int kFp8TableCopies = 32;
inline constexpr int kFp8TableFloats = 256 * kFp8TableCopies;

// Whether the scoring kernel with this key reader decodes through the table.
template <CodeKind kKind, bool kVector>
inline constexpr bool kUsesFp8Table = kVector && kKind != CodeKind::kBf16;

// Packed codes decoded by arithmetic (decode_packed).
template <CodeKind kKind>
struct PackedDecoder {
  __device__ float operator()(uint32_t word, int e) const { return decode_packed<kKind>(word, e); }
};

// fp8 codes decoded by table: entry c of copy l at table[c · kFp8TableCopies
// + l], so the copy a lane reads lies in one bank of its own. The address is
// formed in bytes, table + ((c << kEntryShift) | 4 · l): a shift, a mask, an
// or and an add per element (in PTX; ptxas may merge the mask and the or).
struct Fp8TableDecoder {
  static constexpr int kEntryShift = 7;  // log2(sizeof(float) * kFp8TableCopies)
  const char* table;                     // the table's first byte
  uint32_t lane_bytes;                   // 4 · (lane mod kFp8TableCopies)
  __device__ float operator()(uint32_t word, int e) const {
    const uint32_t shifted = 8 * e < kEntryShift ? word << (kEntryShift - 8 * e) : word >> (8 * e - kEntryShift);
    return *reinterpret_cast<const float*>(table + ((shifted & (0xFFu << kEntryShift)) | lane_bytes));
  }
};
static_assert(sizeof(float) * kFp8TableCopies == 1u << Fp8TableDecoder::kEntryShift, "entry stride");

// Fills the table (every thread of the block; a barrier must follow) and
// returns this thread's decoder. A thread decodes one code and writes its
// copies as float4s, starting at a different float4 than its neighbours so
// that the stores of a wave spread over the banks.
template <CodeKind kKind>
__device__ Fp8TableDecoder load_fp8_table(float* table) {
  constexpr int kQuads = kFp8TableCopies / 4;
  for (int c = static_cast<int>(threadIdx.x); c < 256; c += static_cast<int>(blockDim.x)) {
    const float v = decode_code<kKind>(static_cast<uint32_t>(c));
    float4* entry = reinterpret_cast<float4*>(table + c * kFp8TableCopies);
    for (int j = 0; j < kQuads; ++j) entry[(j + c) % kQuads] = make_float4(v, v, v, v);
  }
  return {reinterpret_cast<const char*>(table),
          static_cast<uint32_t>(sizeof(float) * (threadIdx.x % kFp8TableCopies))};
}

__device__ inline uint32_t vector_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ inline float float4_lane(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// acc[key][i] += q[i · dim + e] · k_key[e] for the codes e of one vector of
// every key, e increasing: the next links of each head's fma chain. kFull:
// the group has all kHeadGroup heads (nh is then not read), which keeps the
// per-head tests out of the common case's inner loop.
template <CodeKind kKind, int kKeys, bool kFull, class Decoder>
__device__ inline void fma_vector(const float* q, int dim, int nh, const uint4 (&kv)[kKeys], const Decoder& decode,
                                  float (&acc)[kKeys][kHeadGroup]) {
  constexpr int kCodes = kCodesPerVector<kKind>;
  constexpr int kPerWord = kCodes / 4;
#pragma unroll
  for (int e0 = 0; e0 < kCodes; e0 += 4) {
    float4 q4[kHeadGroup];
#pragma unroll
    for (int i = 0; i < kHeadGroup; ++i)
      q4[i] = kFull || i < nh ? *reinterpret_cast<const float4*>(q + i * dim + e0)
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float kf[kKeys];
#pragma unroll
      for (int key = 0; key < kKeys; ++key)
        kf[key] = decode(vector_word(kv[key], (e0 + e) / kPerWord), (e0 + e) % kPerWord);
#pragma unroll
      for (int i = 0; i < kHeadGroup; ++i) {
        if (kFull || i < nh) {
          const float qv = float4_lane(q4[i], e);
#pragma unroll
          for (int key = 0; key < kKeys; ++key) acc[key][i] = fmaf(qv, kf[key], acc[key][i]);
        }
      }
    }
  }
}

// Vectors [v0, v0 + kKeyBatch) of every key (those below `vectors` when
// kTail) into one head group's chains, all loaded before any is used.
template <CodeKind kKind, int kKeys, bool kFull, bool kTail, class Decoder>
__device__ inline void fma_batch(const float* qh, const uint4* const (&k)[kKeys], int v0, int vectors, int dim, int nh,
                                 const Decoder& decode, float (&acc)[kKeys][kHeadGroup]) {
  constexpr int kCodes = kCodesPerVector<kKind>;
  uint4 kv[kKeyBatch][kKeys];
#pragma unroll
  for (int u = 0; u < kKeyBatch; ++u)
#pragma unroll
    for (int key = 0; key < kKeys; ++key)
      kv[u][key] = !kTail || v0 + u < vectors ? k[key][v0 + u] : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < kKeyBatch; ++u)
    if (!kTail || v0 + u < vectors)
      fma_vector<kKind, kKeys, kFull>(qh + (v0 + u) * kCodes, dim, nh, kv[u], decode, acc);
}

// One head group's chains over the whole keys k[key] (`vectors` vectors
// each): whole batches without per-vector tests, then the partial one.
template <CodeKind kKind, int kKeys, bool kFull, class Decoder>
__device__ void fma_keys(const float* qh, const uint4* const (&k)[kKeys], int vectors, int dim, int nh,
                         const Decoder& decode, float (&acc)[kKeys][kHeadGroup]) {
  int v0 = 0;
  for (; v0 + kKeyBatch <= vectors; v0 += kKeyBatch)
    fma_batch<kKind, kKeys, kFull, false>(qh, k, v0, vectors, dim, nh, decode, acc);
  if (v0 < vectors) fma_batch<kKind, kKeys, kFull, true>(qh, k, v0, vectors, dim, nh, decode, acc);
}

// out[key] = score of the key whose codes start at k[key] (16-byte aligned,
// d_I a multiple of kCodesPerVector): score_with's order, heads in groups of
// kHeadGroup, each group's chains over the whole key before the next group.
template <CodeKind kKind, int kKeys, class Decoder>
__device__ void score_vectors(const float* q_s, const uint4* const (&k)[kKeys], int heads, int dim, float scale,
                              const Decoder& decode, float (&out)[kKeys]) {
  const int vectors = dim / kCodesPerVector<kKind>;
  float sum[kKeys];
#pragma unroll
  for (int key = 0; key < kKeys; ++key) sum[key] = 0.0f;
  for (int h0 = 0; h0 < heads; h0 += kHeadGroup) {
    const int nh = heads - h0 < kHeadGroup ? heads - h0 : kHeadGroup;
    float acc[kKeys][kHeadGroup];
#pragma unroll
    for (int key = 0; key < kKeys; ++key)
#pragma unroll
      for (int i = 0; i < kHeadGroup; ++i) acc[key][i] = 0.0f;
    const float* qh = q_s + h0 * dim;
    if (nh == kHeadGroup) {
      fma_keys<kKind, kKeys, true>(qh, k, vectors, dim, nh, decode, acc);
    } else {
      fma_keys<kKind, kKeys, false>(qh, k, vectors, dim, nh, decode, acc);
    }
#pragma unroll
    for (int key = 0; key < kKeys; ++key)
#pragma unroll
      for (int i = 0; i < kHeadGroup; ++i)
        if (i < nh) sum[key] += relu_keep_nan(acc[key][i]);
  }
#pragma unroll
  for (int key = 0; key < kKeys; ++key) out[key] = sum[key] * scale;
}

// scores[b] for this thread's blocks b = b0 + threadIdx.x + u · blockDim
// (u < kKeys) below `visible`; nothing else is written. `decode` serves the
// vector reader only.
template <CodeKind kKind, bool kVector, int kKeys, class Code, class Decoder>
__device__ void score_chunk(const float* q_s, const Code* keys, const PagedKeys& g, int heads, float scale,
                            int32_t visible, int64_t b0, const Decoder& decode, float* scores) {
  int32_t b[kKeys];
  int64_t row[kKeys];
  bool in[kKeys];
#pragma unroll
  for (int u = 0; u < kKeys; ++u) {
    const int64_t bu = b0 + threadIdx.x + int64_t{u} * blockDim.x;
    in[u] = bu < visible;
    b[u] = in[u] ? static_cast<int32_t>(bu) : 0;
    row[u] = in[u] ? paged_row(g, b[u]) : -1;
  }
  const float nan = float_from_bits(kQuietNanBits);
  if constexpr (kVector) {
    // A key that is out of range or unmapped is computed on a mapped key's
    // codes (a stand-in; its result is dropped), so the loop stays uniform.
    int64_t stand_in = -1;
#pragma unroll
    for (int u = 0; u < kKeys; ++u)
      if (stand_in < 0) stand_in = row[u];
    if (stand_in < 0) {
#pragma unroll
      for (int u = 0; u < kKeys; ++u)
        if (in[u]) scores[b[u]] = nan;
      return;
    }
    const uint4* k[kKeys];
#pragma unroll
    for (int u = 0; u < kKeys; ++u)
      k[u] = reinterpret_cast<const uint4*>(keys + (row[u] >= 0 ? row[u] : stand_in) * g.dim);
    float s[kKeys];
    score_vectors<kKind, kKeys>(q_s, k, heads, g.dim, scale, decode, s);
#pragma unroll
    for (int u = 0; u < kKeys; ++u)
      if (in[u]) scores[b[u]] = row[u] >= 0 ? s[u] : nan;
  } else {
#pragma unroll
    for (int u = 0; u < kKeys; ++u)
      if (in[u]) scores[b[u]] = row[u] >= 0 ? score_block<kKind>(q_s, keys + row[u] * g.dim, heads, g.dim, scale) : nan;
  }
}

}  // namespace qsa::gpu::select_detail
