// The tensor-core decode kernel (sparse_attention_mma.hpp describes it;
// the prefill kernels are in sparse_attention_mma_prefill.hip, the building
// blocks both use in mma_step.hpp).
// NVIDIA only: on AMD this file compiles to "not supported" and the
// launcher keeps the portable kernel.
#include <cmath>
#include <climits>
#include <cstdint>
#include <string>

#include "gpu/attention/mma_step.hpp"
#include "gpu/attention/sparse_attention_mma.hpp"
#include "gpu/common/dependent_launch.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/common/mma_sm80.hpp"
#include "gpu/common/wave.hpp"

namespace qsa::gpu::attn {

#if defined(QSA_GPU_CUDA)

namespace {

using namespace sm80;
using namespace mma;

// The two e4m3 codes in the low 16 bits of w as two f16 (low byte in the
// low half). Every e4m3 value, NaN included, is exact in f16: OCP e4m3fn
// takes the one-instruction hardware conversion, AMD's fnuz (no NVIDIA
// instruction) the portable decoder.
template <bool kFnuz>
__device__ inline uint32_t fp8_pair_to_f16(uint32_t w) {
  if constexpr (!kFnuz) {
    return e4m3x2_to_f16x2(w);
  } else {
    return f32x2_to_f16x2(fp8_e4m3_to_float(static_cast<uint8_t>(w), true),
                          fp8_e4m3_to_float(static_cast<uint8_t>(w >> 8), true));
  }
}

// The same for the two codes in the high 16 bits of w.
template <bool kFnuz>
__device__ inline uint32_t fp8_high_pair_to_f16(uint32_t w) {
  if constexpr (!kFnuz) {
    return e4m3x2_hi_to_f16x2(w);
  } else {
    return fp8_pair_to_f16<true>(w >> 16);
  }
}

// The two bf16 of a 32-bit word (low half first) as floats.
__device__ inline float bf16_lo(uint32_t w) { return bf16_to_float(static_cast<uint16_t>(w)); }
__device__ inline float bf16_hi(uint32_t w) { return bf16_to_float(static_cast<uint16_t>(w >> 16)); }

// fp8 path, once per block after Q has landed: rewrites Q as f16 A
// fragments in fp8_logits' order, each head row scaled by a power of two
// 2^-s that brings its largest magnitude into [2^14, 2^15) (exact: bf16 has
// fewer mantissa bits than f16, and nothing that matters reaches f16's
// subnormals), and stores 2^s in row_scale. A logit is then
// (Q 2^-s)·K · 2^s, the same value as Q·K: the scaling only keeps Q inside
// f16's range. 16 threads per row; the fragments overwrite the rows they
// come from, so all are read before any is written.
template <int D>
__device__ void q_to_scaled_f16(uint16_t* q_s, float* row_scale) {
  constexpr int kPer = D / 16;  // elements per thread: 4, 8 or 16
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid >> 4, part = tid & 15;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(q_s + r * Smem<D, uint8_t>::kPitch + part * kPer);
  uint32_t w[kPer / 2];
  float mx = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer / 2; ++i) {
    w[i] = words[i];
    mx = fmaxf(mx, fmaxf(fabsf(bf16_lo(w[i])), fabsf(bf16_hi(w[i]))));
  }
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  // s = e - 15 for mx = f 2^e, f in [0.5, 1); 0 for a zero or non-finite row
  // (inf and NaN then pass through unchanged); at least -126 so that 2^-s
  // stays a float (a row below 2^-141 loses only bits that cannot matter).
  int e = 0;
  frexpf(mx, &e);
  const int s = (mx > 0.0f && isfinite(mx)) ? max(e - 15, -126) : 0;
  const float down = bits_float(static_cast<uint32_t>(127 - s) << 23);
#pragma unroll
  for (int i = 0; i < kPer / 2; ++i)
    w[i] = f32x2_to_f16x2(bf16_lo(w[i]) * down, bf16_hi(w[i]) * down);
  if (part == 0) row_scale[r] = bits_float(static_cast<uint32_t>(127 + s) << 23);
  __syncthreads();
  // Dims d, d + 1 (d even) of row r: chunk c = d / 64, lane quad tq =
  // d % 64 / 16, slice 4c + d % 16 / 4; register a0 / a1 (row r < 8 / >= 8)
  // for d % 4 = 0, a2 / a3 for d % 4 = 2 (fp8_logits).
  uint32_t* frag = reinterpret_cast<uint32_t*>(q_s);
#pragma unroll
  for (int i = 0; i < kPer / 2; ++i) {
    const int d = part * kPer + 2 * i;
    const int slice = 4 * (d / 64) + d % 16 / 4, lane = (r % 8) * 4 + d % 64 / 16;
    frag[(slice * 32 + lane) * 4 + (d % 4 / 2) * 2 + r / 8] = w[i];
  }
}

// The token ids of columns [first, first + kWarpChunk) below `limit` (-1
// past it), 16 per lane. Loads only: a caller can issue them before the
// row's request has arrived.
struct ChunkIds {
  int32_t id[kWarpChunk / 32];
};

__device__ void load_chunk_ids(const int32_t* ids, int first, int limit, ChunkIds& out) {
  const int lane = lane32();
#pragma unroll
  for (int k = 0; k < kWarpChunk / 32; ++k) {
    const int c = first + lane + 32 * k;
    out.id[k] = c < limit ? ids[c] : -1;
  }
}

// chunk[i] = the main-cache slot of column `first + i` (i < kWarpChunk) by
// resolve_slot's rule, -1 at or past `end`; `ids` from load_chunk_ids. One
// warp; each lane's page-table loads are all issued before any is used, and
// none waits for seq_len (only the slot does), so the row's seq_len and its
// page entries arrive together. Slices of 32 columns wholly past `end` are
// skipped (a uniform test): a short split pays for its own columns only.
// The launcher guarantees slots fit in int32.
__device__ void resolve_chunk(const KernelArgs& a, const SplitColumns& s, int first, int end, const ChunkIds& ids,
                              int32_t* chunk) {
  constexpr int kPer = kWarpChunk / 32;
  const int lane = lane32();
  int page[kPer];
  int32_t phys[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    page[k] = -1;
    phys[k] = -1;
    if (first + 32 * k >= end) continue;
    page[k] = first + lane + 32 * k < end ? page_of(a, ids.id[k]) : -1;
    phys[k] = page[k] >= 0 ? a.block_table[static_cast<int64_t>(s.req) * a.max_pages + page[k]] : -1;
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const bool live = first + 32 * k < end;
    const bool in = live && first + lane + 32 * k < end;
    chunk[lane + 32 * k] = in ? static_cast<int32_t>(slot_on_page(a, s.seq_len, ids.id[k], page[k], phys[k])) : -1;
  }
  __syncwarp();
}

// Issues the copies of the warp's step `t` into its ring stage `stage` and
// records the step's slots (-1: not attended; the row is zero-filled, so P = 0
// multiplies zeros, never stale data). Each row's K and V go in 16-byte
// pieces.
// The copy pattern is fixed per lane (CopyLane). Copy instruction i of a
// tensor (K or V) covers whole rows, each a contiguous run of kPieces
// 16-byte pieces (a pattern that spread an instruction over 8 rows' 64-byte
// segments measured 10% slower: twice the lines per instruction); lane l
// always copies piece l mod kPieces, of the kCopies consecutive rows from
// (l / kPieces) · kCopies, so its slots are one vector load. A row costs
// one 64-bit multiply per lane, shared by its K and V copies, one compare
// for the zero fill, and the rows' destinations are immediates. The
// instructions per step matter: the issue was 173 of a bf16 step's ~470
// (SASS, docs/performance.md, seventh pass); per-copy addresses once cost
// half of them. (Hopper's bulk copies, one instruction per row, measured
// slower: sixth pass.)
template <int D, class KvT>
struct CopyLane {
  static constexpr int kPieces = D * static_cast<int>(sizeof(KvT)) / 16;  // 16-byte pieces per K (or V) row
  static constexpr int kRowsPerCopy = 32 / kPieces;                       // rows one instruction covers
  static constexpr int kCopies = Smem<D, KvT>::kNT / kRowsPerCopy;        // rows per lane and step
  static_assert(32 % kPieces == 0 && Smem<D, KvT>::kNT % kRowsPerCopy == 0, "a row's pieces tile the warp");
  static_assert(kCopies == 1 || kCopies == 2 || kCopies == 4 || kCopies == 8, "slots load as one or two vectors");
  int row;                     // the first of this lane's kCopies step rows
  const unsigned char* k_src;  // the K cache at this lane's piece of group g
  uint64_t v_minus_k;          // the V cache's address less the K cache's: a row's V piece lies that far from its K
  uint32_t k_dst, v_dst;       // that piece's offsets in a stage for `row`, swizzled
  __device__ CopyLane(const KernelArgs& a, int g, int lane) {
    using L = Smem<D, KvT>;
    row = (lane / kPieces) * kCopies;
    const uint32_t piece = (lane % kPieces) * 16;
    // Row row + i (i < kCopies) is swizzled by swizzle(row) ^ swizzle(i):
    // the first part goes in here, the second is issue_step's per-row XOR.
    const int64_t group_bytes = static_cast<int64_t>(g) * D * static_cast<int>(sizeof(KvT));
    k_src = static_cast<const unsigned char*>(a.k_cache) + group_bytes + piece;
    v_minus_k = reinterpret_cast<uint64_t>(a.v_cache) - reinterpret_cast<uint64_t>(a.k_cache);
    k_dst = static_cast<uint32_t>(row * L::kKPitch) + (piece ^ L::k_swizzle(row));
    v_dst = static_cast<uint32_t>(L::kKTileBytes + L::v_row(row)) + (piece ^ L::v_swizzle(row));
  }
};

// The N bytes at p (N-byte aligned; 4, 8 or a multiple of 16) as 32-bit
// words, in vector loads.
template <int N>
__device__ inline void load_words(const void* p, uint32_t (&w)[N / 4]) {
  if constexpr (N == 4) {
    w[0] = *static_cast<const uint32_t*>(p);
  } else if constexpr (N == 8) {
    const uint2 v = *static_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    static_assert(N % 16 == 0, "4, 8 or a multiple of 16 bytes");
#pragma unroll
    for (int j = 0; j < N / 16; ++j) {
      const uint4 v = static_cast<const uint4*>(p)[j];
      w[4 * j] = v.x, w[4 * j + 1] = v.y, w[4 * j + 2] = v.z, w[4 * j + 3] = v.w;
    }
  }
}

// One row of the epilogue's [kM][kWarps] statistics (16-byte aligned): the
// 8 warps' values in two 16-byte loads.
__device__ inline void load_warp_row(const float* p, float (&v)[kWarps]) {
  static_assert(kWarps == 8, "two float4 per row");
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

template <int D, class KvT>
__device__ void issue_step(const KernelArgs& a, const CopyLane<D, KvT>& cl, int t, int stage, unsigned char* wsm,
                           uint32_t wsm_addr) {
  using L = Smem<D, KvT>;
  using C = CopyLane<D, KvT>;
  const int lane = lane32();
  const int32_t* chunk = reinterpret_cast<const int32_t*>(wsm + L::kChunk) + (t * L::kNT) % kWarpChunk;
  if (lane < L::kNT) reinterpret_cast<int32_t*>(wsm + L::kSlots)[stage * L::kNT + lane] = chunk[lane];
  uint32_t slot_words[C::kCopies];
  load_words<4 * C::kCopies>(chunk + cl.row, slot_words);
  // A row's K address from one 32 x 32 -> 64-bit multiply-add (the
  // launcher keeps slots and a row's bytes in 32 bits), its V address one
  // 64-bit add from there (two multiply-adds of one product: ptxas shares
  // the product and pays two adds each).
  const uint32_t row_bytes = static_cast<uint32_t>(a.kv_heads) * D * static_cast<uint32_t>(sizeof(KvT));
  const uint32_t d = wsm_addr + L::kRing + stage * L::kStageBytes;
#pragma unroll
  for (int i = 0; i < C::kCopies; ++i) {
    const int32_t slot = static_cast<int32_t>(slot_words[i]);
    const unsigned char* k = mad_wide_u32(static_cast<uint32_t>(max(slot, 0)), row_bytes, cl.k_src);
    const auto* v = reinterpret_cast<const unsigned char*>(reinterpret_cast<uint64_t>(k) + cl.v_minus_k);
    // One XOR per row and tensor (none where the swizzle of i is 0): d and
    // the rows' starts are on 128-byte boundaries. bf16's V rows lie
    // kKTileBytes after its K rows, with the same swizzle: one XOR for both.
    const uint32_t k_at = (d + cl.k_dst) ^ L::k_swizzle(i);
    const uint32_t v_at = L::kFp8 ? (d + cl.v_dst) ^ L::v_swizzle(i) : k_at + L::kKTileBytes;
    cp_async16_unless_negative(k_at + i * L::kKPitch, k, slot);
    cp_async16_unless_negative(v_at + L::v_row(i), v, slot);  // (cl.row is even when kCopies > 1)
  }
}

__device__ inline uint32_t p_f16x2(float lo, float hi) {
  const uint32_t b = p_bf16x2(lo, hi);
  return f32x2_to_f16x2(bf16_lo(b), bf16_hi(b));
}

// The same for an fp8 cache, with fragments read straight from the fp8
// rows (a pass that widened each tile to bf16 in shared memory made the
// fp8 kernel slower than the bf16 one at 64 rows, 123 us against 86, though
// it reads half the bytes: docs/performance.md). A dot product may take its
// dims in any order that Q and K share: in each 64-dim chunk c, k16 slice s
// puts dim 64c + 16tq + 4s + j at mma position 2tq + j and dim
// 64c + 16tq + 4s + 2 + j at 2tq + 8 + j (j = 0, 1). A lane's K fragments
// for the chunk's 4 slices are then one 16-byte load of its row gq, each
// 32-bit word one slice's b0 (low codes) and b1 (high). Its Q fragments
// were laid out by q_to_scaled_f16 as [slice][lane][a0 a1 a2 a3]: one
// 16-byte load each, already in the four consecutive registers the mma
// takes (Q rows gq and gq + 8 loaded apart cost 4 register moves per mma,
// a tenth of the step's instructions, ncu). A step's 16 ids are two n8
// tiles of S (rows gq and gq + 8 of the K tile) that share each Q
// fragment: half the Q loads per id of an 8-id step. Each tile's slices
// alternate between two chains: four independent chains in all.
//
// k_lane: this lane's byte offsets of row gq's piece 4c + tq in a K tile,
// for even and odd c (fp8_k_lane_offsets; the swizzle moves odd rows' pieces
// by 64 bytes, one way for even c, the other for odd).
template <int D>
__device__ inline void fp8_k_lane_offsets(int lane, uint32_t (&off)[2]) {
  using L = Smem<D, uint8_t>;
  const int gq = lane >> 2, tq = lane & 3;
  const uint32_t base = static_cast<uint32_t>(gq * L::kKPitch + 16 * tq);
  const uint32_t sw = L::k_swizzle(gq);  // 0 or 64
  off[0] = base + sw;
  off[1] = base - sw;
}

template <int D, bool kFnuz>
__device__ void fp8_logits(float (&sc)[2][2][4], const uint4* q_frag, const unsigned char* k_tile,
                           const uint32_t (&k_lane)[2]) {
  using L = Smem<D, uint8_t>;
  static_assert(L::kTiles == 2, "two n8 tiles per step");
  const int lane = lane32();
#pragma unroll
  for (int c = 0; c < D / 64; ++c) {
    const unsigned char* k_row = k_tile + k_lane[c & 1] + 64 * c;  // row gq; gq + 8 is 8 rows on, same swizzle
    const uint4 k0 = *reinterpret_cast<const uint4*>(k_row);
    const uint4 k1 = *reinterpret_cast<const uint4*>(k_row + 8 * L::kKPitch);
    const uint32_t kw[2][4] = {{k0.x, k0.y, k0.z, k0.w}, {k1.x, k1.y, k1.z, k1.w}};
#pragma unroll
    for (int sl = 0; sl < 4; ++sl) {
      const uint4 q = q_frag[(4 * c + sl) * 32 + lane];
      const uint32_t qa[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int t = 0; t < 2; ++t)
        mma_f16(sc[t][sl & 1], qa, fp8_pair_to_f16<kFnuz>(kw[t][sl]), fp8_high_pair_to_f16<kFnuz>(kw[t][sl]));
    }
  }
}

// The same for an fp8 cache, one k16 mma per n8 tile of dims for the
// step's 16 ids. A B register holds two ids of one dim, and an fp8 tile is
// [id][dim]: lane (gq, tq) loads rows 2tq, 2tq + 1 (b0) and 2tq + 8,
// 2tq + 9 (b1) at the same kFp8VBytes dims and pairs their codes byte by
// byte (two byte permutes per 4 dims and row pair). Which dim each output
// column holds is free: lane gq supplies dims l·8B + gq·B + r (r < B =
// kFp8VBytes, l < D / 8B) as column gq of tile l·B + r, so accumulator c0
// of tile u = l·B + r is dim l·8B + 2tq·B + r and c1 is B dims further (the
// epilogue's fp8 store). v_lane (fp8_v_lane_offset): this lane's bytes of
// row 2tq; rows 2tq + 1, + 8, + 9 lie v_row(1), v_row(8), v_row(9) further
// with the same swizzle.
template <int D>
inline constexpr int kFp8VBytes = D >= 128 ? 16 : 8;

template <int D>
__device__ inline uint32_t fp8_v_lane_offset(int lane) {
  using L = Smem<D, uint8_t>;
  const int gq = lane >> 2, tq = lane & 3;
  return static_cast<uint32_t>(L::v_row(2 * tq)) + ((gq * kFp8VBytes<D>) ^ L::v_swizzle(2 * tq));
}

template <int D, bool kFnuz>
__device__ void fp8_pv(float (&acc)[D / 8][4], const uint32_t (&pa)[4], const unsigned char* v_lane) {
  using L = Smem<D, uint8_t>;
  static_assert(L::kNT == 16, "one k16 slice of ids per step");
  constexpr int kB = kFp8VBytes<D>;
#pragma unroll
  for (int l = 0; l < D / (8 * kB); ++l) {
    uint32_t x[kB / 4], y[kB / 4], z[kB / 4], w[kB / 4];
    load_words<kB>(v_lane + 8 * kB * l, x);
    load_words<kB>(v_lane + L::v_row(1) + 8 * kB * l, y);
    load_words<kB>(v_lane + L::v_row(8) + 8 * kB * l, z);
    load_words<kB>(v_lane + L::v_row(9) + 8 * kB * l, w);
#pragma unroll
    for (int i = 0; i < kB / 4; ++i) {
      const uint32_t lo = __byte_perm(x[i], y[i], 0x5140);  // x.b0 y.b0 x.b1 y.b1: ids 2tq, 2tq + 1
      const uint32_t hi = __byte_perm(x[i], y[i], 0x7362);  // x.b2 y.b2 x.b3 y.b3
      const uint32_t lo8 = __byte_perm(z[i], w[i], 0x5140);  // the same for ids 2tq + 8, 2tq + 9
      const uint32_t hi8 = __byte_perm(z[i], w[i], 0x7362);
      const int u = l * kB + 4 * i;
      mma_f16(acc[u], pa, fp8_pair_to_f16<kFnuz>(lo), fp8_pair_to_f16<kFnuz>(lo8));
      mma_f16(acc[u + 1], pa, fp8_high_pair_to_f16<kFnuz>(lo), fp8_high_pair_to_f16<kFnuz>(lo8));
      mma_f16(acc[u + 2], pa, fp8_pair_to_f16<kFnuz>(hi), fp8_pair_to_f16<kFnuz>(hi8));
      mma_f16(acc[u + 3], pa, fp8_high_pair_to_f16<kFnuz>(hi), fp8_high_pair_to_f16<kFnuz>(hi8));
    }
  }
}

// The columns of the split starting at column `begin` before the count
// column trims them (split_columns gives the trimmed ones), and the first
// column of warp w's share of `len` columns: whole steps, shares differing
// by at most one step. The prefetch and the kernel share both.
__device__ inline int split_size(const KernelArgs& a, int begin) {
  return max(0, min(a.index_width - (a.count_column ? 1 : 0) - begin, a.ids_per_split));
}

template <int NT>
__device__ inline int share_start(int len, int w) {
  const int steps = (len + NT - 1) / NT;
  return min(len, (w * steps / kWarps) * NT);
}

// L2 prefetches of what a block reads first, issued before it waits for
// the previous kernel: the ids each warp starts with (and the count
// column), and by warp 1 the row's request, its seq_len and its
// block-table row (prefetch_row_request, which says why this is safe).
// Measured (docs/performance.md): 8 rows 21.7 -> 21.1 us, 256 rows 320 ->
// 317 us; one row within noise.
template <int NT>
__device__ void prefetch_row_start(const KernelArgs& a) {
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = lane32();
  const int64_t row = blockIdx.x;
  const int32_t* ids = a.token_idx + row * a.index_width;
  // The warp's share as the kernel computes it from the split's size.
  const int begin = static_cast<int>(blockIdx.z) * a.ids_per_split;
  const int nominal = split_size(a, begin);
  const int first = begin + share_start<NT>(nominal, warp);
  const int end = begin + share_start<NT>(nominal, warp + 1);
  if (lane * 32 < min(end - first, kWarpChunk)) prefetch_l2(ids + first + lane * 32);  // 32 ids per line
  if (warp == 0 && lane == 31 && a.count_column) prefetch_l2(ids + a.index_width - 1);
  if (warp == 1) prefetch_row_request(a, row, lane);
}

// kFnuz (fp8 only) picks AMD's e4m3 format at compile time: a runtime
// branch kept both decoders in the step loop (110 KB of code, 243
// registers; the OCP kernel alone is 67 KB and 214). ncu's fetch stalls in
// the larger kernel came from its cache flush, not from back-to-back
// launches (docs/performance.md, seventh pass).
template <int D, class KvT, bool kFnuz>
__global__ void __launch_bounds__(kBlock, 1) mma_decode_kernel(KernelArgs a) {
  using L = Smem<D, KvT>;
  constexpr int kPitch = L::kPitch;
  constexpr int kStages = L::kStages;
  constexpr int kDimTiles = D / 8;  // n8 tiles of the output row
  extern __shared__ __align__(128) unsigned char smem[];
  // The swizzles are XORs on address bits (Smem::k_swizzle): a shared base
  // off a 128-byte boundary would scatter rows into their neighbours. The
  // kernel declares no static shared memory, so its dynamic base is the
  // window's; this guards the assumption (a launch error, never wrong data).
  if constexpr (L::kSwizzled) {
    if (smem_addr(smem) % 128 != 0) __trap();
  }
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + L::kQ);
  float* stat_m = reinterpret_cast<float*>(smem + L::kStats);  // [kM][kWarps]
  float* stat_l = stat_m + kWarps * kM;
  float* stat_f = stat_l + kWarps * kM;  // [kM][kWarps]: exp(m_w - m)
  float* fin_m = stat_f + kWarps * kM;   // [kM]
  float* q_scale = fin_m + kM;           // [kM]: fp8 only, 2^s of each Q row (q_to_scaled_f16)

  // Launched as a programmatic dependent (dependent_launch.hpp): the blocks
  // are resident when the previous kernel ends, and read nothing before it
  // has; they only warm L2 for the row's first dependent loads. The split
  // merge (if any) may then get its blocks ready.
  prefetch_row_start<L::kNT>(a);
  wait_for_primary();
  allow_dependent_launch();
  const int tid = static_cast<int>(threadIdx.x), lane = lane32(), warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  const int64_t row = blockIdx.x;
  const int g = static_cast<int>(blockIdx.y);
  const int split = static_cast<int>(blockIdx.z);
  const int nh = a.heads / a.kv_heads;
  const int h0 = g * nh;
  unsigned char* wsm = smem + L::kWarp0 + warp * L::kWarpBytes;
  const uint32_t wsm_addr = smem_addr(wsm);
  const CopyLane<D, KvT> cl(a, g, lane);

  // The split's columns (split_columns); each warp takes a contiguous share
  // of whole steps, the shares differing by at most one step (the longest
  // warp sets the block's time), and loads the ids of its first chunk
  // early. Splits of at most two steps per warp are shared out by their
  // size before the count column: the ids then load together with the
  // row's metadata, one memory round trip less on a path that is all
  // latency at one row. Longer splits are shared by their counted columns,
  // so that a short row still spreads over every warp.
  const int begin = split * a.ids_per_split;
  const int nominal = split_size(a, begin);
  const bool by_size = a.ids_per_split <= 2 * kWarps * L::kNT;
  const int32_t* row_ids = a.token_idx + row * a.index_width;
  ChunkIds first_ids;
  int wb = begin + share_start<L::kNT>(nominal, warp);
  int wlim = begin + share_start<L::kNT>(nominal, warp + 1);
  if (by_size) load_chunk_ids(row_ids, wb, min(wlim, wb + kWarpChunk), first_ids);
  const SplitColumns s = split_columns(a, row, split);
  const int len = max(0, s.end - s.begin);
  if (!by_size) {
    wb = begin + share_start<L::kNT>(len, warp);
    wlim = begin + share_start<L::kNT>(len, warp + 1);
    load_chunk_ids(row_ids, wb, min(wlim, wb + kWarpChunk), first_ids);
  }
  const int we = max(wb, min(wlim, s.end));
  const int steps = (we - wb + L::kNT - 1) / L::kNT;

  // Q (rows past the group's heads zero-filled) goes into shared memory by
  // asynchronous copies in step 0's group: its load overlaps the row's
  // metadata and the first KV copies instead of holding them back (every
  // thread waits for it, and for the block's barrier, only at step 0).
  for (int i = tid; i < kM * D / 8; i += kBlock) {
    const int h = i / (D / 8), c = (i % (D / 8)) * 8;
    const uint16_t* src = a.q + (row * a.heads + h0 + min(h, nh - 1)) * D + c;
    cp_async16(smem_addr(q_s + h * kPitch + c), src, h < nh);
  }

  // Per-lane ldmatrix row addresses (byte offsets; ldmatrix_x4 documents the
  // lane -> row mapping): Q rows (lane & 7) + 8·bit 3, dims + 8·bit 4 (the A
  // operand's four 8x8 pieces); K and V ids lane & 7, dims + 8·(lane >> 3):
  // for K the b0, b1 of two k16 slices, for V (transposed) the b0 of four
  // n8 tiles of dims.
  const uint32_t q_lane =
      smem_addr(q_s) + (((lane & 7) + ((lane >> 3) & 1) * 8) * kPitch + (lane >> 4) * 8) * 2;
  uint32_t kv_lane_off[2];  // even and odd column groups (bf16_logits, fp8_logits)
  uint32_t fp8_v_off = 0;   // fp8_pv's row 2tq
  if constexpr (L::kFp8) {
    fp8_k_lane_offsets<D>(lane, kv_lane_off);
    fp8_v_off = fp8_v_lane_offset<D>(lane);
  } else {
    kv_lane_offsets<D>(lane, kv_lane_off);
  }

  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // head rows gq and gq + 8
  float q_row_scale[2] = {1.0f, 1.0f};                            // the same rows' 2^s (fp8 only)
  float acc[kDimTiles][4];
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;

  // Steps t < 0 only fill the ring (one copy of the issue code: the
  // kernel's size matters when each warp runs it once, as for one row).
  // Every warp runs step 0, ids or not, for the block barrier that
  // publishes Q.
  const int last = max(steps, 1);
  int fill = 0;  // the ring stage of step t + kStages - 1, counted along (no division per step)
  for (int t = 1 - kStages; t < last; ++t) {
    if (t >= 0) {
      cp_async_wait<kStages - 2>();  // this lane's copies of step t (and, at step 0, of Q) have landed
      if (t == 0) {
        __syncthreads();  // everyone's have: Q and the warp's step 0
        if constexpr (L::kFp8) {
          q_to_scaled_f16<D>(q_s, q_scale);
          __syncthreads();
          q_row_scale[0] = q_scale[gq];
          q_row_scale[1] = q_scale[gq + 8];
        }
      } else {
        __syncwarp();  // the warp's copies of step t have landed, and step t - 1 is fully consumed
      }
    }
    const int next = t + kStages - 1;
    if (next < steps) {
      if ((next * L::kNT) % kWarpChunk == 0) {
        if (next > 0) load_chunk_ids(row_ids, wb + next * L::kNT, we, first_ids);
        resolve_chunk(a, s, wb + next * L::kNT, we, first_ids, reinterpret_cast<int32_t*>(wsm + L::kChunk));
      }
      issue_step<D, KvT>(a, cl, next, fill, wsm, wsm_addr);
    }
    cp_async_commit();
    const int stage = fill + 1 == kStages ? 0 : fill + 1;  // t % kStages, and the next step's fill
    fill = stage;
    if (t < 0 || t >= steps) continue;
    const uint32_t kt = wsm_addr + L::kRing + stage * L::kStageBytes;  // the step's K tile (V follows it)
    const unsigned char* k_tile = wsm + L::kRing + stage * L::kStageBytes;
    // S: kTiles n8 tiles of ids; s4[n][0..1] are head row gq's logits of
    // ids 8n + 2tq + 0..1, s4[n][2..3] row gq + 8's.
    constexpr int kTiles = L::kTiles;
    float s4[kTiles][4];
    if constexpr (L::kFp8) {
      float sc[2][2][4] = {};
      fp8_logits<D, kFnuz>(sc, reinterpret_cast<const uint4*>(q_s), k_tile, kv_lane_off);
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)  // (q_row_scale undoes the scaling of Q exactly)
          s4[n][e] = (sc[n][0][e] + sc[n][1][e]) * q_row_scale[e >> 1] * a.k_scale;
    } else {
      float sc[kChains][4] = {};
      const uint32_t k_lane[2] = {kt + kv_lane_off[0], kt + kv_lane_off[1]};
      bf16_logits<D>(sc, q_lane, k_lane);
#pragma unroll
      for (int e = 0; e < 4; ++e)  // (q_row_scale is 1 for bf16)
        s4[0][e] = ((sc[0][e] + sc[1][e]) + (sc[2][e] + sc[3][e])) * q_row_scale[e >> 1] * a.k_scale;
    }
    const int32_t* slots = reinterpret_cast<const int32_t*>(wsm + L::kSlots) + stage * L::kNT;
    if (a.round_logits) {  // one uniform branch, not one per logit
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s4[n][e] = round_bf16(round_bf16(s4[n][e]) * a.scale);
    } else {
#pragma unroll
      for (int n = 0; n < kTiles; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s4[n][e] *= a.scale;
    }
    float r0[2 * kTiles], r1[2 * kTiles];  // head rows gq and gq + 8, masked
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const bool live = slots[8 * n + tq * 2 + j] >= 0;
        r0[2 * n + j] = live ? s4[n][j] : -INFINITY;
        r1[2 * n + j] = live ? s4[n][2 + j] : -INFINITY;
      }
    const float al0 = softmax_row(r0, m0, l0);
    const float al1 = softmax_row(r1, m1, l1);
    // Rescale only when some row's max moved: alpha = 1 is a no-op, so
    // skipping it changes no bit; nor does skipping it at step 0, where
    // every accumulator is still zero.
    if (t > 0 && __any_sync(0xffffffffu, al0 != 1.0f || al1 != 1.0f)) {
#pragma unroll
      for (int i = 0; i < kDimTiles; ++i) {
        acc[i][0] *= al0;
        acc[i][1] *= al0;
        acc[i][2] *= al1;
        acc[i][3] *= al1;
      }
    }
    // P as the A operand of the PV mma straight from the S accumulators'
    // layout: for k8 (bf16) rows gq, gq + 8 of ids 2tq..; for k16 (fp8)
    // also the same rows of ids 8 + 2tq.. (a2, a3: the second n8 tile).
    if constexpr (L::kFp8) {
      const uint32_t pa[4] = {p_f16x2(r0[0], r0[1]), p_f16x2(r1[0], r1[1]), p_f16x2(r0[2], r0[3]),
                              p_f16x2(r1[2], r1[3])};
      fp8_pv<D, kFnuz>(acc, pa, k_tile + L::kKTileBytes + fp8_v_off);
    } else {
      const uint32_t v_lane[2] = {kt + L::kKTileBytes + kv_lane_off[0], kt + L::kKTileBytes + kv_lane_off[1]};
      bf16_pv<D>(acc, p_bf16x2(r0[0], r0[1]), p_bf16x2(r1[0], r1[1]), v_lane);
    }
  }
  cp_async_wait<0>();  // no copy may outlive the block (the last groups are empty)

  // Merge the warps: m = max_w m_w, and with f_w = exp(m_w - m),
  // l = sum_w l_w f_w and A = sum_w acc_w f_w, both in warp order
  // (deterministic). Each factor f_w is computed once, by one thread (at one
  // row each warp runs this epilogue once and its instruction count is the
  // kernel's time: docs/performance.md, fifth pass), while the warps store
  // their accumulators unscaled; the sums apply the factors. One barrier
  // and a multiply per accumulator fewer than scaling before the store, and
  // each thread sums 4 dims of a row with 16-byte loads: the epilogue was a
  // tenth of a 64-row launch's instructions (SASS and ncu, seventh pass).
  // Each thread's outputs: 4 consecutive dims of one head row per pass.
  constexpr int kPasses = kM * D / (4 * kBlock);
  static_assert(kM * D % (4 * kBlock) == 0, "whole passes");
  const int64_t out0 = (row * a.heads + h0) * D;  // the group's first output element
  // With one split the gates load first, before the barriers: one memory
  // latency behind the merge, not one per pass (see store_gated).
  uint16_t gates[kPasses][4];
  if (a.splits == 1) {
#pragma unroll
    for (int k = 0; k < kPasses; ++k)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = (tid + k * kBlock) * 4 + e;
        gates[k][e] = i < nh * D ? a.gate[out0 + i] : 0;
      }
  }
  if (tq == 0) {  // [kM][kWarps]: a row's 8 values are two 16-byte loads
    stat_m[gq * kWarps + warp] = m0;
    stat_m[(gq + 8) * kWarps + warp] = m1;
    stat_l[gq * kWarps + warp] = l0;
    stat_l[(gq + 8) * kWarps + warp] = l1;
  }
  __syncthreads();  // the stats; and every warp is done with its ring, which the merge buffer reuses
  if (tid < kWarps * kM) {
    float mv[kWarps];
    load_warp_row(stat_m + (tid / kWarps) * kWarps, mv);
    const float m = fmaxf(fmaxf(fmaxf(mv[0], mv[1]), fmaxf(mv[2], mv[3])), fmaxf(fmaxf(mv[4], mv[5]), fmaxf(mv[6], mv[7])));
    const float mw = stat_m[tid];
    stat_f[tid] = mw == -INFINITY ? 0.0f : expf(mw - m);
    if (tid % kWarps == 0) fin_m[tid / kWarps] = m;
  }
  float* merge = reinterpret_cast<float*>(smem + L::kWarp0);  // [kWarps][kM][kMergePitch]
  float* m0_row = merge + (warp * kM + gq) * L::kMergePitch;
  float* m1_row = m0_row + 8 * L::kMergePitch;
  if constexpr (L::kFp8) {
    // fp8_pv's columns: c0 of tile l·B + r is dim l·8B + 2tq·B + r, c1 is B further.
    constexpr int kB = kFp8VBytes<D>;
#pragma unroll
    for (int l = 0; l < D / (8 * kB); ++l) {
#pragma unroll
      for (int r = 0; r < kB; r += 4) {
        const int u = l * kB + r, d = l * 8 * kB + 2 * tq * kB + r;
        auto put = [&](float* at, int e) {
          *reinterpret_cast<float4*>(at) = make_float4(acc[u][e], acc[u + 1][e], acc[u + 2][e], acc[u + 3][e]);
        };
        put(m0_row + d, 0);
        put(m0_row + d + kB, 1);
        put(m1_row + d, 2);
        put(m1_row + d + kB, 3);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kDimTiles; ++i) {
      const int d = i * 8 + tq * 2;
      *reinterpret_cast<float2*>(m0_row + d) = make_float2(acc[i][0], acc[i][1]);
      *reinterpret_cast<float2*>(m1_row + d) = make_float2(acc[i][2], acc[i][3]);
    }
  }
  __syncthreads();  // the factors and every warp's accumulators
  // The launcher checks that the workspace is 16-byte aligned; merge rows
  // are too (kMergePitch % 4 == 0).
#pragma unroll
  for (int k = 0; k < kPasses; ++k) {
    const int i = (tid + k * kBlock) * 4;
    if (i >= nh * D) break;
    const int h = i / D, d = i % D;
    float f[kWarps], lw[kWarps];
    load_warp_row(stat_f + h * kWarps, f);
    load_warp_row(stat_l + h * kWarps, lw);
    float l = 0.0f;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      l += lw[w] * f[w];
      const float4 x = *reinterpret_cast<const float4*>(merge + (w * kM + h) * L::kMergePitch + d);
      v[0] = fmaf(x.x, f[w], v[0]);
      v[1] = fmaf(x.y, f[w], v[1]);
      v[2] = fmaf(x.z, f[w], v[2]);
      v[3] = fmaf(x.w, f[w], v[3]);
    }
    if (a.splits == 1) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = v[e] * a.v_scale;
        store_gated(a, out0 + i + e, softmax_normalized(x, l), gates[k][e]);
      }
    } else {
      const int64_t head = row * a.heads + h0 + h;
      *reinterpret_cast<float4*>(a.ws_acc + (head * a.splits + split) * D + d) =
          make_float4(v[0] * a.v_scale, v[1] * a.v_scale, v[2] * a.v_scale, v[3] * a.v_scale);
      if (d == 0) {  // the row's first thread also writes its (m, l)
        a.ws_ml[(head * a.splits + split) * 2] = fin_m[h];
        a.ws_ml[(head * a.splits + split) * 2 + 1] = l;
      }
    }
  }
}

// Blocks of one instantiation that fit on a multiprocessor of the current
// device; opts the kernel in to its shared memory there first (once per
// device, device_limits.hpp).
template <int D, class KvT, bool kFnuz = false>
int prepare_kernel() {
  return resident_blocks(reinterpret_cast<const void*>(mma_decode_kernel<D, KvT, kFnuz>), kBlock,
                         Smem<D, KvT>::kBytes);
}

int blocks_per_sm_for(int head_dim, bool fp8) {
  switch (head_dim) {
    case 64: return fp8 ? prepare_kernel<64, uint8_t>() : prepare_kernel<64, uint16_t>();
    case 128: return fp8 ? prepare_kernel<128, uint8_t>() : prepare_kernel<128, uint16_t>();
    default: return fp8 ? prepare_kernel<256, uint8_t>() : prepare_kernel<256, uint16_t>();
  }
}

template <int D, class KvT, bool kFnuz = false>
void launch_typed(const KernelArgs& a, int64_t rows, hipStream_t stream) {
  prepare_kernel<D, KvT, kFnuz>();
  LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(rows), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(a.splits));
  shape.block = dim3(kBlock);
  shape.shared_bytes = Smem<D, KvT>::kBytes;
  launch_dependent(mma_decode_kernel<D, KvT, kFnuz>, shape, stream, a);
}

template <int D>
void launch_for_cache(const KernelArgs& a, int64_t rows, bool fp8, hipStream_t stream) {
  if (!fp8) return launch_typed<D, uint16_t>(a, rows, stream);
  if (a.fnuz) return launch_typed<D, uint8_t, true>(a, rows, stream);
  launch_typed<D, uint8_t>(a, rows, stream);
}

}  // namespace

bool mma_decode_params_supported(int head_dim, int group, PRounding p_rounding) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 && group <= kM &&
         p_rounding == PRounding::kBf16Unnormalized;
}

bool mma_decode_supported(const KernelArgs& a, int head_dim, int group) {
  // Slots are kept as int32 in shared memory.
  const bool slots_fit = a.num_pages * static_cast<int64_t>(a.page_size) <= INT32_MAX;
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 && group <= kM && a.round_p &&
         slots_fit && is_aligned(a.q, 16) && is_aligned(a.k_cache, 16) && is_aligned(a.v_cache, 16);
}

int mma_decode_splits(int64_t pairs, int cols, int max_splits, int head_dim, bool fp8) {
  if (pairs <= 0 || cols <= 0) return 1;
  // One wave of blocks: more splits only add merge traffic and tail blocks.
  const int64_t slots = static_cast<int64_t>(device_limits().multiprocessors) * blocks_per_sm_for(head_dim, fp8);
  int64_t want = (slots + pairs / 2) / pairs;  // rounded: 2.06 waves of one-split blocks -> 2 splits
  const int step = mma_step_ids(fp8);
  const int64_t by_tiles = (cols + kWarps * step - 1) / (kWarps * step);  // a step for every warp
  if (want > by_tiles) want = by_tiles;
  if (want > max_splits) want = max_splits;
  return want < 1 ? 1 : static_cast<int>(want);
}

void launch_mma_decode(const KernelArgs& a, int head_dim, int64_t rows, bool fp8, hipStream_t stream) {
  switch (head_dim) {
    case 64: return launch_for_cache<64>(a, rows, fp8, stream);
    case 128: return launch_for_cache<128>(a, rows, fp8, stream);
    case 256: return launch_for_cache<256>(a, rows, fp8, stream);
    default: throw ConfigError("gpu attention: head_dim " + std::to_string(head_dim) + " has no tensor-core kernel");
  }
}

#else  // AMD: the portable kernel only

bool mma_decode_supported(const KernelArgs&, int, int) { return false; }
bool mma_decode_params_supported(int, int, PRounding) { return false; }
int mma_decode_splits(int64_t, int, int max_splits, int, bool) { return max_splits; }
void launch_mma_decode(const KernelArgs&, int, int64_t, bool, hipStream_t) {
  throw ConfigError("gpu attention: the tensor-core decode kernel exists only in CUDA builds");
}
#endif

}  // namespace qsa::gpu::attn
