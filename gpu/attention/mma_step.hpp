// Device building blocks shared by the tensor-core attention kernels
// (sparse_attention_mma.hip: decode; sparse_attention_mma_prefill.hip:
// prefill): the decode kernel's shared-memory layout (whose swizzled bf16
// rows the sm_80 prefill kernel reuses), the online softmax of one head row,
// P's bf16 packing, and the bf16 logit and PV steps of one warp's m16 tile.
// NVIDIA only (inline PTX): include only from .hip files; everything here is
// inside `#if defined(QSA_GPU_CUDA)`.
#pragma once

#include <cmath>
#include <cstdint>

#include "gpu/attention/attention_tile.hpp"
#include "gpu/common/device_api.hpp"
#include "gpu/common/exact_math.hpp"
#include "gpu/common/mma_sm80.hpp"

#if defined(QSA_GPU_CUDA)

namespace qsa::gpu::attn::mma {

using namespace sm80;

// Two warps per scheduler: one warp alone stalls on its own dependent mma,
// shuffle and ldmatrix latencies (measured: 4 warps per SM with 16-id
// steps reached 68% of the copy bandwidth). Eight warps' bf16 rings fit the
// shared memory only with 8-id steps; fp8 rows, half the bytes, take 16-id
// steps (Smem::kNT).
constexpr int kWarps = 8;
constexpr int kBlock = kWarps * 32;
constexpr int kM = 16;            // query heads per block, padded to the mma's rows
constexpr int kWarpChunk = 256;   // ids whose slots a warp resolves together (8 per lane)

// Shared-memory layout for head dim D and cache element KvT: Q once, then
// per warp its own ring, slots and slot chunk (warps never touch each
// other's), then the per-warp softmax state for the final merge.
// Q rows are padded by 16 bytes so that the 8 rows an ldmatrix reads start
// on different bank groups. K and V rows are not padded but swizzled: the
// 16-byte pieces of a row are permuted within each 128-byte run by an XOR
// of their offset with k_swizzle(r) (v_swizzle(r)), so that every row
// starts on a 32-byte boundary and the 8 lanes of each shared-memory load
// phase still hit 8 bank groups:
//   bf16 (ldmatrix: 8 rows at one piece): piece c of row r at c ^ (r mod 8);
//   fp8 K (row gq, pieces 4c + tq; a phase is gq in {2p, 2p + 1}): the odd
//     rows swap the 64-byte halves of each run;
//   fp8 V (rows 2tq + {0, 1, 8, 9}, piece gq (+ 8l); a phase is gq in
//     {2p, 2p + 1}): row r XORs bits 5-6 with (r / 2) mod 4.
// Padded rows (the earlier layout: D + 8 bf16 elements; fp8 V at D + 16
// bytes) put odd rows 16 bytes into a sector, and such a copy read twice
// the L2 sectors (ncu; docs/performance.md, eighth and ninth passes). fp8
// with D = 64 keeps a padded layout, one that is sector-aligned (K rows of
// 64 bytes; a V tile holds its even rows, then its odd rows, at a pitch of
// D + 32), because its rows are too short for the fp8 swizzles. fp8 rows
// stay fp8: the warp reads its fragments straight from them (fp8_logits,
// fp8_pv). Unpadded 16-id fp8 steps fit 3 stages, as 8-id bf16 steps do:
// 2 steps in flight, 16 or 32 ids.
template <int D, class KvT>
struct Smem {
  static constexpr bool kFp8 = sizeof(KvT) == 1;
  static constexpr bool kSwizzled = !kFp8 || D % 128 == 0;    // else fp8 with D = 64: padded, unswizzled
  static constexpr int kNT = kFp8 ? 16 : 8;                   // ids per warp step: n8 tiles of S, k of the PV mma
  static constexpr int kTiles = kNT / 8;
  static constexpr int kStages = 3;                           // steps in each warp's ring (kStages - 1 in flight)
  static constexpr int kPitch = D + 8;                        // 16-bit elements per padded Q row
  static constexpr int kKPitch = D * static_cast<int>(sizeof(KvT));             // bytes per K row
  static constexpr int kVPitch = kSwizzled ? kKPitch : D + 32;  // bytes from a V row to the next one (of its half)
  static constexpr int kVHalf = kSwizzled ? 0 : kNT / 2 * kVPitch;  // fp8, D = 64: the odd rows' offset in a V tile
  static constexpr int kKTileBytes = kNT * kKPitch;
  static constexpr int kStageBytes = kKTileBytes + kNT * kVPitch;  // [K | V]
  // Row r's offset in a V tile; row0 + i's is v_row(row0) + v_row(i) for
  // an even row0.
  __host__ __device__ static constexpr int v_row(int r) {
    return kSwizzled ? r * kVPitch : (r & 1) * kVHalf + (r >> 1) * kVPitch;
  }
  // The XOR on a byte offset within row r (bits 4-6; 0 when unswizzled).
  // For row0 a multiple of a power of two n <= 8 and i < n, the swizzle of
  // row0 + i is swizzle(row0) ^ swizzle(i) (CopyLane relies on it).
  __host__ __device__ static constexpr uint32_t k_swizzle(int r) {
    return !kSwizzled ? 0u : kFp8 ? static_cast<uint32_t>(r & 1) << 6 : static_cast<uint32_t>(r & 7) << 4;
  }
  __host__ __device__ static constexpr uint32_t v_swizzle(int r) {
    return !kSwizzled ? 0u : kFp8 ? static_cast<uint32_t>((r >> 1) & 3) << 5 : static_cast<uint32_t>(r & 7) << 4;
  }
  // Within one warp's region:
  static constexpr int kRing = 0;                             // [stage][K | V] tiles
  static constexpr int kSlots = kRing + kStages * kStageBytes;  // [stage][kNT] int32
  static constexpr int kChunk = kSlots + kStages * kNT * 4;   // [kWarpChunk] int32
  static constexpr int kWarpBytes = (kChunk + kWarpChunk * 4 + 127) / 128 * 128;
  // Block layout:
  static constexpr int kQ = 0;  // [kM][kPitch] bf16; fp8: f16 A fragments from step 0 on (q_to_scaled_f16)
  static constexpr int kWarp0 = kQ + kM * kPitch * 2;
  // m, l, factors [3][kM][kWarps]; final m [kM]; Q row scales [kM]
  static constexpr int kStats = kWarp0 + kWarps * kWarpBytes;
  static constexpr int kBytes = kStats + (3 * kWarps * kM + 2 * kM) * 4;
  // The cross-warp merge buffer [kWarps][kM][kMergePitch] floats reuses the
  // warps' regions once every warp has finished its ids.
  static constexpr int kMergePitch = D + 4;
  static_assert(kMergePitch % 4 == 0, "merge rows are read as float4");
  static_assert(D / 16 * 32 * 16 <= kM * kPitch * 2, "Q's f16 fragments fit where its rows were");
  static_assert(kWarps * kM * kMergePitch * 4 <= kWarps * kWarpBytes, "merge buffer fits the rings");
  static_assert(kWarp0 % 16 == 0 && kWarpBytes % 16 == 0 && kStageBytes % 16 == 0 && kKPitch % 16 == 0 &&
                    kVPitch % 16 == 0 && kSlots % 16 == 0,
                "16-byte aligned regions");
  static_assert(kKPitch % 32 == 0 && kVPitch % 32 == 0 && kVHalf % 32 == 0 && kKTileBytes % 32 == 0 &&
                    kStageBytes % 32 == 0 && (kWarp0 + kRing) % 32 == 0 && kWarpBytes % 32 == 0,
                "rows start on 32-byte boundaries");
  // A swizzle permutes the pieces within each 128-byte run of a row: rows
  // and tiles start on 128-byte boundaries, so that XOR-ing an address's
  // bits 4-6 is the same as XOR-ing its offset in the row (the kernel
  // checks that the shared base is on one too).
  static_assert(!kSwizzled || (kKPitch % 128 == 0 && kKTileBytes % 128 == 0 && kStageBytes % 128 == 0 &&
                               (kWarp0 + kRing) % 128 == 0 && kWarpBytes % 128 == 0),
                "swizzled K and V rows start on 128-byte boundaries");
};

// NVIDIA warps are 32 wide; a literal lets the compiler fold lane arithmetic.
__device__ inline int lane32() { return static_cast<int>(threadIdx.x) & 31; }

// 2^x on the special-function unit (one instruction; relative error about
// 2^-22, far inside the bf16 rounding every P takes; results below 2^-126
// flush to 0).
__device__ inline float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

constexpr float kLog2e = 1.4426950408889634f;
// A row's running max moves only when a logit passes it by more than this
// (ln 256): P = exp(s - m) then stays below 256, well inside bf16 and f16,
// and the 128 accumulator multiplies of a rescale run a few times per warp
// instead of in most steps (estimated: with random logits, one of a warp's
// 12 head rows finds a new max in step t with probability ~12/(t + 1)). The
// final (m, l, O) are consistent for any m, so the merges are unchanged.
constexpr float kLazyMax = 5.545177444479562f;

// Max and sum over the 4 lanes of an mma quad (the lanes that hold one head
// row's logits of an n8 tile), every lane getting the result.
__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// L2 prefetches, by one warp, of row `row`'s request, its seq_len and its
// block-table row (the first 1024 pages), issued before a kernel waits for
// the previous one. A prefetch only fills L2, which the previous kernel's
// writes also reach, so no later load can see stale data; the request that
// steers the last two is read through L2 only (no L1 line to go stale) and
// only chooses addresses, bounds-checked.
__device__ inline void prefetch_row_request(const KernelArgs& a, int64_t row, int lane) {
  if (a.num_reqs <= 0) return;
  if (lane == 0) prefetch_l2(a.token_to_req + row);
  const int req = __ldcg(a.token_to_req + row);
  if (req < 0 || req >= a.num_reqs) return;
  if (lane == 1) prefetch_l2(a.seq_lens + req);
  if (lane * 32 < a.max_pages) prefetch_l2(a.block_table + static_cast<int64_t>(req) * a.max_pages + lane * 32);
}

// Online softmax of one head row over the step's N logits this lane holds
// (2 per n8 tile; the tile's other 6 sit in the 3 lanes of the same quad):
// updates m and l,
// turns the logits into unrounded weights exp(s - m) (the caller rounds
// them to bf16 as it packs the PV operand) and returns alpha =
// exp(m_old - m_new). Same rules as tile_softmax: -inf logits give P = 0,
// fmaxf skips NaN in the max, l sums the unrounded weights. With no finite
// logit yet, m stays -inf and every weight is 0.
template <int N>
__device__ inline float softmax_row(float (&s)[N], float& m, float& l) {
  float mx = s[0];
#pragma unroll
  for (int i = 1; i < N; ++i) mx = fmaxf(mx, s[i]);
  mx = quad_max(mx);
  const bool move = mx > m + kLazyMax;  // false while mx = -inf (and for NaN)
  const float m_new = move ? mx : m;
  const float m_sub = m_new == -INFINITY ? 0.0f : m_new;  // -inf logits then give exp2(-inf) = 0
  float sum = 0.0f;
  auto weight = [&](float& x) {
    x = exp2_approx((x - m_sub) * kLog2e);
    sum += x;
  };
#pragma unroll
  for (int i = 0; i < N; ++i) weight(s[i]);
  sum = quad_sum(sum);
  const float alpha = move ? exp2_approx((m - m_new) * kLog2e) : 1.0f;  // m = -inf: 0 (l and O are 0 anyway)
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

// Two weights as the PV mma's A register: rounded to bf16 (round to
// nearest even, one instruction), the canonical P; for the fp8 path then
// widened to f16, which holds every bf16 value in [2^-17, 65504] exactly.
__device__ inline uint32_t p_bf16x2(float lo, float hi) { return exact::bf16x2_rn(lo, hi); }

// A lane's ldmatrix row offsets in a swizzled bf16 K or V tile. For K
// (non-transposed: the b0, b1 of two k16 slices) and for V (transposed: the
// b0 of four n8 tiles of dims) alike, lane l gives row r = l & 7 at chunk
// 4kp + j, j = l >> 3, in the kp-th 64-byte column group. Swizzled, that
// chunk is (4kp + j) ^ r = 4 (kp ^ (r >> 2)) + (j ^ (r & 3)): the offset is
// kp · 64 plus a lane constant that differs between even and odd kp (by
// twice (r >> 2) · 64), so the loops keep immediate offsets from two bases.
template <int D>
__device__ inline void kv_lane_offsets(int lane, uint32_t (&off)[2]) {
  const int r = lane & 7, j = lane >> 3;
  const int base = r * D * 2 + ((j ^ (r & 3)) << 4);
  off[0] = static_cast<uint32_t>(base + (r >> 2) * 64);
  off[1] = static_cast<uint32_t>(base - (r >> 2) * 64);
}

// S[16 heads, 8 ids] = Q K^T for a bf16 cache (Q and K through ldmatrix),
// as kChains independent mma chains (k16 slice j in chain j mod kChains)
// that the caller adds: one chain of D/16 dependent mmas would be the
// step's longest latency, and with two warps per scheduler a warp's own
// latencies are what it waits on (ncu: "wait" the top stall at 64 rows).
constexpr int kChains = 4;

// The K (and V) tiles are swizzled: kv_lane_offsets gives this lane's two
// row addresses, one for the even 64-byte column groups kp, one for the odd.
template <int D>
__device__ void bf16_logits(float (&sc)[kChains][4], uint32_t q_lane, const uint32_t (&k_lane)[2]) {
#pragma unroll
  for (int kp = 0; kp < D / 32; ++kp) {
    uint32_t b[4];
    ldmatrix_x4(b, k_lane[kp & 1] + kp * 64);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t qa[4];
      ldmatrix_x4(qa, q_lane + (2 * kp + half) * 32);
      mma_bf16(sc[(2 * kp + half) % kChains], qa, b[2 * half], b[2 * half + 1]);
    }
  }
}

// Q's A fragments for every k16 slice, held in registers by a kernel whose
// Q stays put across its tiles (the spread kernel's: loaded while the first
// tile's K rows are still in flight, which takes them and a block barrier
// off the path from K's landing to the logits).
template <int D>
__device__ void load_q_fragments(uint32_t (&qa)[D / 16][4], uint32_t q_lane) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k) ldmatrix_x4(qa[k], q_lane + k * 32);
}

// bf16_logits with Q's fragments already in registers (load_q_fragments).
template <int D>
__device__ void bf16_logits(float (&sc)[kChains][4], const uint32_t (&qa)[D / 16][4], const uint32_t (&k_lane)[2]) {
#pragma unroll
  for (int kp = 0; kp < D / 32; ++kp) {
    uint32_t b[4];
    ldmatrix_x4(b, k_lane[kp & 1] + kp * 64);
#pragma unroll
    for (int half = 0; half < 2; ++half)
      mma_bf16(sc[(2 * kp + half) % kChains], qa[2 * kp + half], b[2 * half], b[2 * half + 1]);
  }
}

// O[16 heads, D] += P V for a bf16 cache, V through ldmatrix.trans.
template <int D>
__device__ void bf16_pv(float (&acc)[D / 8][4], uint32_t pa0, uint32_t pa1, const uint32_t (&v_lane)[2]) {
#pragma unroll
  for (int np = 0; np < D / 32; ++np) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, v_lane[np & 1] + np * 64);
#pragma unroll
    for (int j = 0; j < 4; ++j) mma_bf16_k8(acc[4 * np + j], pa0, pa1, b[j]);
  }
}

}  // namespace qsa::gpu::attn::mma

#endif  // QSA_GPU_CUDA
