// The spread decode kernel (sparse_attention_mma.hpp describes it): a few
// decode rows, each (row, KV group) spread over about one block per
// multiprocessor, and the blocks' partials merged in the same launch after
// a barrier over the pair's blocks. NVIDIA only (it shares the tensor-core
// kernels' mma code); elsewhere the launcher keeps the split-K kernel and
// its merge.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "gpu/attention/fast_epilogue.hpp"
#include "gpu/attention/mma_step.hpp"
#include "gpu/attention/sparse_attention_mma.hpp"
#include "gpu/common/arrival_counters.hpp"
#include "gpu/common/bulk_copy_sm90.hpp"
#include "gpu/common/dependent_launch.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/common/mma_sm80.hpp"

namespace qsa::gpu::attn {

#if defined(QSA_GPU_CUDA)

namespace {

using namespace sm80;
using mma::kChains;
using mma::kM;
using mma::lane32;

constexpr int kSpWarps = 4;
constexpr int kSpThreads = 32 * kSpWarps;
constexpr int kSpTile = 8 * kSpWarps;  // ids per tile: one n8 tile of logits per warp
constexpr uint32_t kFlip = 0x80000000u;  // a barrier's total addition to its counter
// A merging thread's splits, held in registers at once: 65 blocks per pair
// (the model's shape) over 8 threads per quad take 9. With 32 threads per
// quad, a launch may have 32 kMergeSplits blocks per pair.
constexpr int kMergeSplits = 9;
constexpr int kMaxSplits = 32 * kMergeSplits;
// Whether V rows come by bulk copies (one per row, Hopper's copy engine)
// while K rows come by cp.async: both copy paths in flight at once. Given
// slots, one row took 7.39 us against 7.48 with both by cp.async
// (docs/performance.md, thirty-first pass). sm_90a builds only.
#if defined(QSA_CUDA_SM90A)
constexpr bool kBulkV = true;
#else
constexpr bool kBulkV = false;
#endif
// Block-table entries a lane holds: a row's first 128 pages (204800 tokens
// in pages of 1600) are looked up by shuffles, later ones in memory.
constexpr int kTableRegs = 4;

// What a launch needs beyond KernelArgs (whose splits and ids_per_split are
// the blocks per (row, group) and each block's columns; ws_acc and ws_ml
// the blocks' partials, [T, H, splits, D] and [T, H, splits, 2]).
struct SpreadArgs {
  int64_t counters;  // index in spread_counters of the launch's [rows x kv_heads] barrier counters
};

// The kernel's ring of barrier counters (arrival_counters.hpp): zero when
// the module loads, never reset.
__device__ uint32_t spread_counters[kArrivalRing];

// Shared memory for head dim D while the block attends. K and V tiles are
// [kSpTile][D] bf16 rows, unpadded and swizzled as the split-K kernel's
// (piece c of row r at c ^ (r mod 8): ldmatrix's 8 rows hit 8 bank groups,
// every row starts on a sector); Q and P rows are padded by 16 bytes for
// the same reason, and so are V rows that a bulk copy writes (it cannot
// swizzle). kBar is the bulk copies' mbarrier.
template <int D>
struct SpSmem {
  static constexpr int kRowBytes = 2 * D;      // a K or V row
  static constexpr int kQPitch = D + 8;        // bf16 per Q row
  static constexpr int kPPitch = kSpTile + 8;  // bf16 per P row
  static constexpr int kK = 0;
  static constexpr int kVPitch = kBulkV ? kRowBytes + 16 : kRowBytes;
  static constexpr int kV = kK + kSpTile * kRowBytes;
  static constexpr int kQ = kV + kSpTile * kVPitch;          // [kM][kQPitch]
  static constexpr int kP = kQ + kM * kQPitch * 2;           // [kM][kPPitch]: the tile's weights
  static constexpr int kStatM = kP + kM * kPPitch * 2;       // [kM][kSpWarps]: each warp's max of the tile
  static constexpr int kStatL = kStatM + kM * kSpWarps * 4;  // [kM][kSpWarps]: each warp's sum
  static constexpr int kSlot = kStatL + kM * kSpWarps * 4;  // [kSpTile]: the tile's cache slots
  static constexpr int kBar = kSlot + kSpTile * 4;
  static constexpr int kBytes = kBar + 8;
  static_assert(kV % 128 == 0 && kQ % 16 == 0 && kP % 16 == 0 && kStatM % 16 == 0 && kStatL % 16 == 0 &&
                    kVPitch % 16 == 0 && kBar % 8 == 0,
                "tiles on 128-byte, rows on 16-byte boundaries");
};

// Threads per output quad in the merge, for `share` quads per block and S
// blocks per pair: a power of two up to 32 (a quad's threads sit in one
// warp and add their parts by shuffles), the most whose quads fit the block
// at once, or more where each would hold more than kMergeSplits splits.
// Every block of a launch takes the same, so a head's sum L has the same
// bits in every block that stores part of it.
__host__ __device__ inline int merge_parts(int share, int S) {
  int p = 1;
  while (p < 32 && (2 * p * share <= kSpThreads || p * kMergeSplits < S)) p *= 2;
  return p;
}

__device__ inline uint32_t swizzle(int r) { return static_cast<uint32_t>(r & 7) << 4; }

__device__ inline uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every block of a (row, group) arrives, then waits for the others. Block 0
// adds kFlip - (S - 1) and each other block 1, so one barrier adds kFlip:
// the counter's top bit flips once all have arrived, and the counter needs
// no reset between launches. Before that the counter's low 31 bits are a
// partial sum of the additions, never 0, so the block whose addition leaves
// them 0 is the last to arrive, and its wait polls nothing: its atomic
// read every other block's arrival. Each block's global stores before its
// arrival are visible to every block's loads after its wait (the arrival's
// atomic is acq_rel, the wait's load acquires; the block barriers at both).
// Between the two the block may run code that reads nothing the others
// wrote. A block that polls kPollLimit times (seconds) traps: some block
// of the pair is not resident and never will be (two launches on two
// streams each holding part of the GPU), and the launch fails instead of
// hanging. One atom.acq_rel instead of a fence and a relaxed atomic, and
// no poll for the last block: one row 6.47 -> 6.42 us, the same way in
// three A/Bs but under the 1% they call a change (docs/performance.md,
// thirty-fifth pass).
constexpr uint32_t kPollLimit = 1u << 24;
// The arrival; thread 0's result is the counter after its addition (pair_wait's).
__device__ inline uint32_t pair_arrive(uint32_t* counter, int block, int blocks) {
  __syncthreads();
  uint32_t now = 0;
  if (threadIdx.x == 0) {
    const uint32_t add = block == 0 ? kFlip - static_cast<uint32_t>(blocks - 1) : 1u;
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(add) : "memory");
    now = old + add;
  }
  return now;
}
__device__ inline void pair_wait(const uint32_t* counter, uint32_t now) {
  if (threadIdx.x == 0 && (now & (kFlip - 1)) != 0)
    for (uint32_t polls = 1; ((now ^ load_acquire(counter)) & kFlip) == 0; ++polls)
      if (polls == kPollLimit) __trap();
  __syncthreads();
}

// A block's place: block j of (row, group g)'s a.splits takes columns
// [begin, nominal_end) before the count column trims them (so that its ids
// can load before the count); in the merge it owns float4 quads
// [quad0, quad0 + quads) of the group's nh · D outputs.
struct SpBlock {
  int64_t row;
  int g, j, splits;
  int begin, nominal_end;
  int quads, quad0;
};

__host__ __device__ inline int merge_share(int nh, int head_dim, int splits) {
  const int all = nh * head_dim / 4;
  return (all + splits - 1) / splits;
}

__device__ inline SpBlock sp_block(const KernelArgs& a, int head_dim) {
  SpBlock b;
  b.j = static_cast<int>(blockIdx.x);
  b.splits = static_cast<int>(gridDim.x);
  b.g = static_cast<int>(blockIdx.y);
  b.row = blockIdx.z;
  const int width = a.index_width - (a.count_column ? 1 : 0);
  b.begin = min(b.j * a.ids_per_split, width);
  b.nominal_end = min(b.begin + a.ids_per_split, width);
  const int nh = a.heads / a.kv_heads;
  const int all = nh * head_dim / 4;
  const int share = merge_share(nh, head_dim, b.splits);
  b.quad0 = min(b.j * share, all);
  b.quads = min(all - b.quad0, share);
  return b;
}

// Thread t's place in a round of the merge: quad t / parts of the block's
// share (`q`), part t mod parts (parts is a power of two); the quad's first
// part stores its outputs where the quad is in the share (`stores`).
struct MergeQuad {
  int q, part;
  bool live, stores;
};

__device__ inline MergeQuad merge_quad(const SpBlock& b, int parts, int t) {
  MergeQuad m;
  m.q = t >> (__ffs(parts) - 1);
  m.part = t & (parts - 1);
  m.live = m.q < b.quads;
  m.stores = m.live && m.part == 0;
  return m;
}

// A merging thread's lane in one round: its quad's first element e of the
// group's nh · D outputs, whether it stores them (MergeQuad), and where its
// splits' partials lie: split part + k · parts's (m, l) at ml[k] and O quad
// at o[k], for k < splits (0 outside the share). Every address is computed
// here, before the loads may go: the first round's before the barrier's
// wait.
struct MergeLane {
  const float2* ml[kMergeSplits];
  const float4* o[kMergeSplits];
  int e, splits;
  bool stores;
};

__device__ inline MergeLane merge_lane(const KernelArgs& a, const SpBlock& b, int64_t head0, int parts, int t,
                                       int head_dim) {
  const MergeQuad mq = merge_quad(b, parts, t);
  const int S = b.splits;
  MergeLane ln;
  ln.stores = mq.stores;
  ln.e = (b.quad0 + (mq.live ? mq.q : 0)) * 4;
  ln.splits = mq.live && mq.part < S ? min(kMergeSplits, (S - mq.part + parts - 1) >> (__ffs(parts) - 1)) : 0;
  const int64_t head = head0 + ln.e / head_dim;
  const float2* ml = reinterpret_cast<const float2*>(a.ws_ml) + head * S + mq.part;
  const float4* o =
      reinterpret_cast<const float4*>(a.ws_acc) + ((head * S + mq.part) * head_dim + ln.e % head_dim) / 4;
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) {
    ln.ml[k] = ml + k * parts;
    ln.o[k] = o + static_cast<int64_t>(k) * parts * (head_dim / 4);
  }
  return ln;
}

// L2 prefetches of what the block reads first, issued before it waits for
// the previous kernel (as the split-K kernel's prefetch_row_start, whose
// comment says why this is safe), a warp each: the block's ids (or slots)
// and the count column; the group's Q rows; the gates of the block's share
// of the outputs; without slots, the row's request, seq_len and block-table
// row (the first 1024 pages: prefetch_row_request).
template <int D>
__device__ void sp_prefetch(const KernelArgs& a, const SpBlock& b) {
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = lane32();
  const int nh = a.heads / a.kv_heads;
  const int64_t out0 = (b.row * a.heads + static_cast<int64_t>(b.g) * nh) * D;
  if (warp == 0) {
    const int32_t* ids = (a.token_slots != nullptr ? a.token_slots : a.token_idx) + b.row * a.index_width;
    if (lane * 32 < b.nominal_end - b.begin) prefetch_l2(ids + b.begin + lane * 32);  // 32 ids per line
    if (lane == 31 && a.count_column) prefetch_l2(ids + a.index_width - 1);
  } else if (warp == 1) {
    for (int l = lane; l < nh * D / 64; l += 32) prefetch_l2(a.q + out0 + l * 64);  // 64 bf16 per line
  } else if (warp == 2) {
    for (int l = lane; l * 16 < b.quads; l += 32) prefetch_l2(a.gate + out0 + (b.quad0 + l * 16) * 4);
  } else if (a.token_slots == nullptr) {
    mma::prefetch_row_request(a, b.row, lane);
  }
}

// Request `req`'s block-table row (row 0 where `real` is false: never read then).
__device__ inline const int32_t* table_row_of(const KernelArgs& a, bool real, int req) {
  return a.block_table + static_cast<int64_t>(real ? req : 0) * a.max_pages;
}

// Request `req`'s seq_len and its block-table entries for the first 32 ·
// kTableRegs pages in registers, lane l holding pages l + 32 r (0 and -1
// where `real` is false): with them a slot waits for no table load of its
// own (the twenty-seventh pass), only ids on later pages load their entry.

__device__ inline void row_meta(const KernelArgs& a, bool real, int req, int lane, int64_t& seq_len,
                                int32_t (&table)[kTableRegs]) {
  seq_len = real ? a.seq_lens[req] : 0;
  const int32_t* row = table_row_of(a, real, req);
#pragma unroll
  for (int r = 0; r < kTableRegs; ++r) table[r] = real && lane + 32 * r < a.max_pages ? row[lane + 32 * r] : -1;
}

// A quad's gates and their sigmoids (gate_sigmoids; `ok` its flag).
struct MergeGate {
  OutVec<uint16_t, 4> gate;
  float sig[4];
  bool ok;
};

__device__ inline MergeGate merge_gate(const KernelArgs& a, const OutVec<uint16_t, 4>& gate) {
  MergeGate g;
  g.gate = gate;
  g.ok = true;
  gate_sigmoids(a, gate, g.sig, g.ok);
  return g;
}

// Keeps a lane's values as computed where this is called: the compiler can
// neither see through the empty volatile asm (so it cannot recompute them
// later, where they are used) nor move it past other volatile asm (the
// barrier's polls). Without it nvcc computed the first round's addresses
// after the wait.
__device__ inline void pin(MergeLane& ln, MergeGate& g) {
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) asm volatile("" : "+l"(ln.ml[k]), "+l"(ln.o[k]));
  int stores = ln.stores, ok = g.ok;
  asm volatile("" : "+r"(ln.e), "+r"(ln.splits), "+r"(stores), "+r"(ok));
  asm volatile("" : "+f"(g.sig[0]), "+f"(g.sig[1]), "+f"(g.sig[2]), "+f"(g.sig[3]));
  ln.stores = stores != 0;
  g.ok = ok != 0;
}

// One round of the merge (the kernel's comment describes it) for the
// thread's lane: loads, weights, sums, and where the lane is its quad's
// first, the outputs. Every lane of the block calls it (the shuffles).
template <int D>
__device__ inline void merge_round(const KernelArgs& a, const MergeLane& ln, const MergeGate& g, int parts,
                                   int64_t out0, bool vector_out) {
  float2 ml[kMergeSplits];
  float4 o[kMergeSplits];
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) {
    // Past the thread's splits: weight 0 and -0 terms, so that their FMAs
    // below add -0, which leaves every sum as it was (+0 would turn a -0
    // sum into +0), and need no branch.
    ml[k] = make_float2(-INFINITY, -0.0f);
    o[k] = make_float4(-0.0f, -0.0f, -0.0f, -0.0f);
    if (k < ln.splits) {
      ml[k] = __ldcg(ln.ml[k]);
      o[k] = __ldcg(ln.o[k]);
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) m = fmaxf(m, ml[k].x);
  for (int x = 1; x < parts; x <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, x));
  // Every weight first, unconditionally (independent: their exponentials
  // overlap; a branch around each would chain them), then the sums in
  // split order. A block that attended nothing weighs 0.
  float w[kMergeSplits];
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) {
    const float e = mma::exp2_approx((ml[k].x - m) * mma::kLog2e);
    w[k] = ml[k].x == -INFINITY ? 0.0f : e;
  }
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float l = 0.0f;
#pragma unroll
  for (int k = 0; k < kMergeSplits; ++k) {
    l = fmaf(ml[k].y, w[k], l);
    v.x = fmaf(o[k].x, w[k], v.x);
    v.y = fmaf(o[k].y, w[k], v.y);
    v.z = fmaf(o[k].z, w[k], v.z);
    v.w = fmaf(o[k].w, w[k], v.w);
  }
  for (int x = 1; x < parts; x <<= 1) {
    v.x += __shfl_xor_sync(0xffffffffu, v.x, x);
    v.y += __shfl_xor_sync(0xffffffffu, v.y, x);
    v.z += __shfl_xor_sync(0xffffffffu, v.z, x);
    v.w += __shfl_xor_sync(0xffffffffu, v.w, x);
    l += __shfl_xor_sync(0xffffffffu, l, x);
  }
  if (!ln.stores) return;
  // outputs_fast's bits are the plain epilogue's, without its branch per
  // element (fast_epilogue.hpp); the plain one where it declines.
  const OutVec<float, 4> x = {{v.x, v.y, v.z, v.w}};
  OutVec<float, 4> out;
  OutVec<uint16_t, 4> gated;
  const bool finite = isfinite(l) & isfinite(v.x) & isfinite(v.y) & isfinite(v.z) & isfinite(v.w);
  if (!(finite && outputs_fast(a, x, l, g.sig, g.ok, out, gated))) outputs_plain(a, x, l, g.gate, out, gated);
  if (vector_out) {
    *reinterpret_cast<OutVec<float, 4>*>(a.attn + out0 + ln.e) = out;
    *reinterpret_cast<OutVec<uint16_t, 4>*>(a.gated + out0 + ln.e) = gated;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      a.attn[out0 + ln.e + k] = out.v[k];
      a.gated[out0 + ln.e + k] = gated.v[k];
    }
  }
}

// One block of 4 warps per split of a (row, KV group); a launch has about
// one block per multiprocessor, all resident at once (the launcher checks).
// The block takes its columns in tiles of 32 ids (one, at the model's
// shape):
//   slots   warp 0 resolves the tile's 32 ids to cache slots (a lane each,
//           the block-table entries from registers) into shared memory;
//           after a block barrier warp w copies the K and V rows of ids
//           8w..8w+7 (cp.async, zero-filled for ids not attended; with
//           kBulkV its lanes 0-7 copy the V rows by one bulk copy each,
//           or write zeros, completing on the block's mbarrier);
//   logits  warp w: S[16 heads, 8 ids] = Q K^T for its own 8 rows (the
//           split-K kernel's bf16_logits, with Q's fragments in registers
//           since the first tile), masked, and its max per head row;
//   weights after a block barrier, each warp takes the tile's max per head
//           row (one running max, exact: no lag) and writes P = bf16(
//           exp(S - m)) for its 8 ids to shared memory, and their sum;
//   PV      after a second barrier (V landed), warp w computes its n8 tiles
//           of dims (w, w + 4, ...) over the tile's 32 ids: P by ldmatrix,
//           V by ldmatrix.trans, k16 mmas. No warp holds a whole output
//           row, so no warps merge.
// Then each block stores its (m, l, O), O unnormalised, to the workspace,
// and the pair's blocks meet at a barrier (pair_arrive, pair_wait). After it, block j
// merges its share of the pair's outputs over all S blocks: `parts` threads
// per output quad load their splits' partials and (m, l) into registers at
// once (one round trip), take the head's max M by shuffles, sum O_s w_s and
// l_s w_s, w_s = exp(m_s - M), over their splits and add their parts by a
// shuffle tree, all in fixed orders (deterministic: the same bits whatever
// the blocks' timing), and the quad's first thread stores A = O / L and the
// gated output (outputs_fast: no branch per element, twenty-eighth pass).
// No shared memory and no block barrier after the pair's.
// At one row every phase is a chain of latencies, not work. Stamps of every
// block given slots (median block, us after the wait; 6.24 us per launch in
// the stamped build): the slot row and count 0.5, the tile's slots 0.7,
// copies issued 1.3, thread 0's warp's K landed 1.7, its logits 1.9, V
// landed 2.3, attention done 2.6, partials stored 2.8, barrier passed 4.0,
// merge (m, l) landed 4.8, sums 5.0, outputs stored 5.2 (docs/performance.md,
// thirty-eighth pass): V's landing, not the arithmetic, sets when PV starts,
// and issuing the copies sooner does not make K land sooner.
template <int D>
__global__ void __launch_bounds__(kSpThreads, 1) spread_decode_kernel(KernelArgs a, SpreadArgs sa) {
  using L = SpSmem<D>;
  constexpr int kPieces = D / 8;             // 16-byte pieces per row
  constexpr int kCopies = 8 * kPieces / 32;  // a lane's pieces of the warp's 8 rows
  constexpr int kOwn = D / 8 / kSpWarps;     // n8 dim tiles per warp in PV: 2, 4 or 8
  static_assert(kOwn % 2 == 0, "dim tiles in pairs (one ldmatrix.trans each)");
  extern __shared__ __align__(128) unsigned char smem[];
  if (smem_addr(smem) % 128 != 0) __trap();  // the swizzle XORs address bits (mma_step.hpp's Smem)
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem + L::kQ);
  uint32_t* p_s = reinterpret_cast<uint32_t*>(smem + L::kP);  // bf16 pairs
  float* stat_m = reinterpret_cast<float*>(smem + L::kStatM);
  float* stat_l = reinterpret_cast<float*>(smem + L::kStatL);

  const SpBlock b = sp_block(a, D);
  sp_prefetch<D>(a, b);
  // The V copies' mbarrier: one arrival per row lane (8 per warp) and phase,
  // a phase per tile.
  const uint32_t v_bar = smem_addr(smem + L::kBar);
  if constexpr (kBulkV) {
    if (threadIdx.x == 0) sm90::mbarrier_init(v_bar, 8 * kSpWarps);
    __syncthreads();
  }
  // A guess at the row's request, read before the wait (the previous kernel
  // may still write it) and used after it only to choose which seq_len and
  // table row to load before the request itself lands; the loaded request
  // decides (row_meta). With slots the kernel reads neither.
  const bool by_slot = a.token_slots != nullptr;
  const int req_guess = threadIdx.x < 32 && !by_slot ? __ldcg(a.token_to_req + b.row) : -1;
  // Everything the slot chain and the first copies need that the previous
  // kernel does not write is computed here, before the wait, and pinned
  // (the empty asm statements: without them nvcc may sink it past the wait
  // again). After the wait it sat on the chain, where with one warp per
  // scheduler nothing hides an instruction's latency. The slots resolved
  // 0.74 -> 0.67 us after the wait in the stamped builds, one row 6.28 ->
  // 6.10 us (docs/performance.md, thirty-sixth pass).
  const int tid = static_cast<int>(threadIdx.x), lane = lane32(), warp = tid >> 5;
  const int gq = lane >> 2, tq = lane & 3;
  int nh = a.heads / a.kv_heads;
  const int64_t head0 = b.row * a.heads + static_cast<int64_t>(b.g) * nh;  // the group's first head row
  int64_t out0 = head0 * D;
  const bool meta = warp == 0;
  const int32_t* row_ids = (by_slot ? a.token_slots : a.token_idx) + b.row * a.index_width;
  int64_t slot_limit = a.num_pages * a.page_size;  // a slot past the cache reads nothing
  int parts = merge_parts(merge_share(nh, D, b.splits), b.splits);
  int tiles = (b.nominal_end - b.begin + kSpTile - 1) / kSpTile;  // uniform over the block
  const uint32_t k_tile = smem_addr(smem + L::kK), v_tile = smem_addr(smem + L::kV);
  uint32_t row_bytes = static_cast<uint32_t>(a.kv_heads) * D * 2;
  const unsigned char* k_src = static_cast<const unsigned char*>(a.k_cache) + static_cast<int64_t>(b.g) * D * 2;
  const unsigned char* v_src = static_cast<const unsigned char*>(a.v_cache) + static_cast<int64_t>(b.g) * D * 2;
  // ldmatrix lane addresses: Q and P as A operands (rows (lane & 7) + 8 ·
  // bit 3, columns + 8 · bit 4); K of the warp's 8 rows (kv_lane_offsets);
  // V rows (lane & 7) + 8 · bit 3 (b0 and b1 of a k16 slice) at dim tile
  // w + 4 · bit 4, so that one ldmatrix.trans serves tiles 2p and 2p + 1 of
  // the warp's (w + 8p and w + 8p + 4: 128 bytes on per p, past the
  // swizzle's bits).
  const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  uint32_t q_lane = smem_addr(q_s) + (a_row * L::kQPitch + (lane >> 4) * 8) * 2;
  uint32_t p_lane = smem_addr(p_s) + (a_row * L::kPPitch + (lane >> 4) * 8) * 2;
  uint32_t k_off[2];
  mma::kv_lane_offsets<D>(lane, k_off);
  const uint32_t k_warp = k_tile + warp * 8 * L::kRowBytes;
  uint32_t k_lane[2] = {k_warp + k_off[0], k_warp + k_off[1]};
  const uint32_t v_dims = static_cast<uint32_t>((warp + kSpWarps * (lane >> 4)) * 16);
  uint32_t v_lane = v_tile + a_row * L::kVPitch + (kBulkV ? v_dims : v_dims ^ swizzle(a_row));

  // The first loads' addresses (warp 0: the count column and lane l's
  // column b.begin + l) and this thread's Q copies (rows past the group's
  // heads zero-filled).
  const int32_t* count_at = row_ids + (a.index_width - 1);
  const int32_t* id_at = row_ids + b.begin + lane;
  int id_ok = b.begin + lane < b.nominal_end;
  constexpr int kQCopies = kM * D / 8 / kSpThreads;
  static_assert(kQCopies * kSpThreads == kM * D / 8, "Q's pieces split evenly over the threads");
  const uint16_t* q_src[kQCopies];
  uint32_t q_dst[kQCopies];
  int q_ok[kQCopies];
#pragma unroll
  for (int k = 0; k < kQCopies; ++k) {
    const int i = tid + k * kSpThreads, h = i / (D / 8), c = (i % (D / 8)) * 8;
    q_dst[k] = smem_addr(q_s + h * L::kQPitch + c);
    q_src[k] = a.q + out0 + static_cast<int64_t>(min(h, nh - 1)) * D + c;
    q_ok[k] = h < nh;
    asm volatile("" : "+l"(q_src[k]), "+r"(q_dst[k]), "+r"(q_ok[k]));
  }
  // The epilogue's addresses too: the block's (m, l, O) in the workspace,
  // [T, H, S, D] and [T, H, S, 2] (this thread's O pairs of head rows gq and
  // gq + 8 at dims (warp + kSpWarps j) · 8 + 2 tq, j < kOwn: 32 floats
  // apart, so the stores take immediate offsets; rows_ok's bits 0 and 1:
  // whether the group has head rows gq and gq + 8), the gates of the quad
  // it stores in the merge's first round (thread q · parts stores quad q; a
  // thread that stores none loads its group's first) and the pair's
  // counter. Computed after the tiles, their 64-bit index arithmetic was
  // ~170 instructions between the last PV and the partials' stores, with
  // one warp per scheduler, on every block's way to the pair barrier: one
  // row 6.04 -> 5.93 us (docs/performance.md, thirty-eighth pass).
  const int64_t ws_row = (head0 + gq) * b.splits + b.j;  // head row gq's split b.j
  float* acc_at = a.ws_acc + ws_row * D + warp * 8 + 2 * tq;
  float* acc_at8 = acc_at + static_cast<int64_t>(8) * b.splits * D;
  float* ml_at = a.ws_ml + ws_row * 2;
  float* ml_at8 = ml_at + static_cast<int64_t>(16) * b.splits;
  int rows_ok = (gq < nh ? 1 : 0) | (gq + 8 < nh ? 2 : 0);
  const MergeQuad first = merge_quad(b, parts, tid);
  const uint16_t* gate_at = a.gate + out0 + (first.stores ? b.quad0 + first.q : 0) * 4;
  uint32_t* counter = spread_counters + sa.counters + b.row * a.kv_heads + b.g;
  asm volatile("" : "+l"(acc_at), "+l"(acc_at8), "+l"(ml_at), "+l"(ml_at8), "+r"(rows_ok), "+l"(gate_at),
               "+l"(counter));
  asm volatile("" : "+l"(count_at), "+l"(id_at), "+r"(id_ok));
  asm volatile("" : "+r"(nh), "+l"(out0), "+l"(row_ids), "+l"(slot_limit), "+r"(parts), "+r"(tiles));
  asm volatile("" : "+l"(k_src), "+l"(v_src), "+r"(row_bytes), "+r"(k_lane[0]), "+r"(k_lane[1]), "+r"(v_lane),
               "+r"(q_lane), "+r"(p_lane));
  wait_for_primary();

  // The slot chain's first links before anything else: the count column,
  // the row's request and the first tile's ids, so that no load or copy
  // queues ahead of them (behind the Q copies and the gate loads they cost
  // 0.2 us more at one row; docs/performance.md, twenty-sixth pass). Warp 0
  // alone loads the row's metadata and resolves the tile's 32 slots (lane
  // l: column l of the tile) for the others: every block of the launch
  // reads the same request, count, seq_len and table lines, and one warp
  // per block asks their L2 slice a quarter as often as four would. With
  // slots (SparseAttentionArgs::token_slots) the chain is the slots alone:
  // their row holds the count column too, and a column that attends
  // nothing (a padding row's every column) is -1, so neither the request
  // nor the table is read.
  int32_t count = 0, id = -1;
  int req = -1;
  if (meta) {
    count = a.count_column ? *count_at : 0;
    req = by_slot ? -1 : a.token_to_req[b.row];
    id = id_ok ? *id_at : -1;
  }
  // The guessed row's seq_len and table entries, loaded now (replaced below
  // where the loaded request differs).
  int64_t seq_len;
  int32_t table[kTableRegs];
  row_meta(a, meta && req_guess >= 0 && req_guess < a.num_reqs, req_guess, lane, seq_len, table);

  // Q in its own copy group.
#pragma unroll
  for (int k = 0; k < kQCopies; ++k) cp_async16(q_dst[k], q_src[k], q_ok[k] != 0);
  cp_async_commit();

  // The row's counted columns (split_columns' rule).
  int n = a.index_width - (a.count_column ? 1 : 0);
  if (a.count_column) n = max(0, min(count, a.index_width - 1));
  const bool real = meta && (by_slot || (req >= 0 && req < a.num_reqs));  // (only warp 0 uses it)
  // Usually the guess held, and its loads went out a trip to L2 before the
  // request landed.
  if (req != req_guess) row_meta(a, real, req, lane, seq_len, table);
  const int32_t* table_row = table_row_of(a, real && !by_slot, req);
  const int end = real ? min(n, b.nominal_end) : b.begin;

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // head rows gq, gq + 8
  float acc[kOwn][4];
#pragma unroll
  for (int j = 0; j < kOwn; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  uint32_t q_frag[D / 16][4];  // Q's A fragments, loaded in the first tile
  for (int t = 0; t < tiles; ++t) {
    if (t > 0) __syncthreads();  // every warp is done with the previous tile's K, V, P and statistics
    int32_t* slot_s = reinterpret_cast<int32_t*>(smem + L::kSlot);
    if (meta) {
      // Lane l: column col of the tile, its id loaded a tile ahead; its
      // page's entry from the lane that holds it (every lane shuffles), or
      // from memory past the registers' pages.
      const int col = b.begin + t * kSpTile + lane;
      if (by_slot) {
        slot_s[lane] = col < end && id >= 0 && id < slot_limit ? id : -1;
      } else {
        const int page = page_of(a, id);
        int32_t phys = -1;
#pragma unroll
        for (int r = 0; r < kTableRegs; ++r) {
          const int32_t entry = __shfl_sync(0xffffffffu, table[r], page & 31);
          if ((page >> 5) == r) phys = entry;
        }
        if (page >= 32 * kTableRegs && real) phys = table_row[page];
        slot_s[lane] = col < end ? static_cast<int32_t>(slot_on_page(a, seq_len, id, page, phys)) : -1;
      }
      if (t + 1 < tiles) id = col + kSpTile < b.nominal_end ? row_ids[col + kSpTile] : -1;  // under this tile's work
    }
    __syncthreads();  // the tile's slots
    const int32_t slot = lane < 8 ? slot_s[8 * warp + lane] : -1;
    // The warp's 8 K rows, then their V rows: row r's pieces are
    // consecutive lanes' (one 16-byte copy each), its slot read from shared
    // memory by every lane (a broadcast read: the shuffles of `slot` it
    // replaced each waited for lane r's read, thirty-seventh pass). A
    // cp.async writes shared memory, so ptxas keeps each read behind the
    // copy before it and the 8 copies issue as one chain; with the slots
    // read first they went out 0.14 us sooner, but K landed no sooner
    // (docs/performance.md, thirty-eighth pass). With kBulkV lane r < 8
    // copies V row r whole instead.
    const uint32_t v_warp = v_tile + warp * 8 * L::kRowBytes;
#pragma unroll
    for (int kv = 0; kv < (kBulkV ? 1 : 2); ++kv) {
#pragma unroll
      for (int k = 0; k < kCopies; ++k) {
        const int idx = lane + 32 * k, r = idx / kPieces, piece = idx % kPieces;
        const int32_t s = slot_s[8 * warp + r];
        const uint32_t off = r * L::kRowBytes + ((piece * 16) ^ swizzle(r));
        const unsigned char* src = mad_wide_u32(static_cast<uint32_t>(max(s, 0)), row_bytes, kv ? v_src : k_src);
        cp_async16_unless_negative((kv ? v_warp : k_warp) + off, src + piece * 16, s);
      }
      cp_async_commit();
    }
    if constexpr (kBulkV) {
      if (lane < 8) {
        // Zeros for an id not attended: its P is 0, but 0 times what the
        // row held before need not be. The first tile's rows need no proxy
        // fence (no ordinary access of them precedes their copies: a zeroed
        // row gets no copy in the same tile); later tiles' rows were read by
        // ldmatrix or zeroed in the tiles before.
        const int row_off = L::kV + (8 * warp + lane) * L::kVPitch;
        sm90::mbarrier_arrive_expect(v_bar, slot >= 0 ? L::kRowBytes : 0);
        if (slot >= 0) {
          const unsigned char* src = v_src + static_cast<int64_t>(slot) * row_bytes;
          if (t == 0)
            sm90::bulk_copy_unfenced(smem_addr(smem + row_off), src, L::kRowBytes, v_bar);
          else
            sm90::bulk_copy(smem_addr(smem + row_off), src, L::kRowBytes, v_bar);
        } else {
          for (int c = 0; c < L::kRowBytes; c += 16) *reinterpret_cast<uint4*>(smem + row_off + c) = uint4{};
        }
      }
    }
    // The next kernel may launch once the first tile's copies are out, not
    // right after the wait: there the trigger held up the instructions
    // after it (thread 0 stamped its slots 0.3 us later), and the slot chain
    // waited; here the block is only waiting for K and V. One row 6.40 ->
    // 6.23 us (docs/performance.md, thirty-sixth pass).
    if (t == 0) allow_dependent_launch();
    const bool live0 = slot_s[8 * warp + 2 * tq] >= 0;
    const bool live1 = slot_s[8 * warp + 2 * tq + 1] >= 0;

    if (t == 0) {
      // Q landed long before (its copies went first); its fragments go to
      // registers now, while K flies, so that K's landing is followed by
      // K's ldmatrix and the mmas alone, with no block barrier between
      // (with the flag below tested once: one row 6.66 -> 6.47 us;
      // docs/performance.md, thirty-fourth pass).
      cp_async_wait<kBulkV ? 1 : 2>();  // this thread's Q copies (K's, and V's without kBulkV, may fly)
      __syncthreads();                  // Q came from every warp
      mma::load_q_fragments<D>(q_frag, q_lane);
    }
    cp_async_wait<kBulkV ? 0 : 1>();  // this lane's K copies; V may still fly
    __syncwarp();                     // the warp's own K rows
    float sc[kChains][4] = {};
    mma::bf16_logits<D>(sc, q_frag, k_lane);
    // Scaled (and rounded) logits, the flag tested once: tested per element,
    // each of the four waited for the one before (-0.07 us at one row).
    float s4[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) s4[e] = ((sc[0][e] + sc[1][e]) + (sc[2][e] + sc[3][e])) * a.k_scale;
    if (a.round_logits) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[e] = round_bf16(round_bf16(s4[e]) * a.scale);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) s4[e] *= a.scale;
    }
    // Row gq's logits of ids 2tq, 2tq + 1 in s4[0..1], row gq + 8's in s4[2..3].
    float r0[2] = {live0 ? s4[0] : -INFINITY, live1 ? s4[1] : -INFINITY};
    float r1[2] = {live0 ? s4[2] : -INFINITY, live1 ? s4[3] : -INFINITY};
    const float wm0 = mma::quad_max(fmaxf(r0[0], r0[1])), wm1 = mma::quad_max(fmaxf(r1[0], r1[1]));
    if (tq == 0) {
      stat_m[gq * kSpWarps + warp] = wm0;
      stat_m[(gq + 8) * kSpWarps + warp] = wm1;
    }
    __syncthreads();  // every warp's maxima

    // The tile's max per head row joins the running max; fmaxf skips NaN
    // (a NaN logit still makes its weight NaN, as in the reference). With
    // no attended id yet m stays -inf and every weight is 0.
    float m_new[2], alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 mv = *reinterpret_cast<const float4*>(stat_m + (gq + 8 * h) * kSpWarps);
      const float mx = fmaxf(fmaxf(m_run[h], fmaxf(mv.x, mv.y)), fmaxf(mv.z, mv.w));
      m_new[h] = mx;
      alpha[h] = m_run[h] == mx ? 1.0f : mma::exp2_approx((m_run[h] - mx) * mma::kLog2e);  // -inf -> finite: 0
      m_run[h] = mx;
    }
    const float sub0 = m_new[0] == -INFINITY ? 0.0f : m_new[0];
    const float sub1 = m_new[1] == -INFINITY ? 0.0f : m_new[1];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      r0[j] = mma::exp2_approx((r0[j] - sub0) * mma::kLog2e);
      r1[j] = mma::exp2_approx((r1[j] - sub1) * mma::kLog2e);
    }
    // P rounded to bf16 (the PV operand); l sums the unrounded weights.
    p_s[(gq * L::kPPitch + 8 * warp + 2 * tq) / 2] = mma::p_bf16x2(r0[0], r0[1]);
    p_s[((gq + 8) * L::kPPitch + 8 * warp + 2 * tq) / 2] = mma::p_bf16x2(r1[0], r1[1]);
    const float ws0 = mma::quad_sum(r0[0] + r0[1]), ws1 = mma::quad_sum(r1[0] + r1[1]);
    if (tq == 0) {
      stat_l[gq * kSpWarps + warp] = ws0;
      stat_l[(gq + 8) * kSpWarps + warp] = ws1;
    }
    if constexpr (kBulkV) {
      sm90::mbarrier_wait(v_bar, static_cast<uint32_t>(t & 1));
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // P, the sums and every warp's V rows

#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 lv = *reinterpret_cast<const float4*>(stat_l + (gq + 8 * h) * kSpWarps);
      l_run[h] = l_run[h] * alpha[h] + (((lv.x + lv.y) + lv.z) + lv.w);
    }
    if (t > 0) {
#pragma unroll
      for (int j = 0; j < kOwn; ++j) {
        acc[j][0] *= alpha[0];
        acc[j][1] *= alpha[0];
        acc[j][2] *= alpha[1];
        acc[j][3] *= alpha[1];
      }
    }
#pragma unroll
    for (int kk = 0; kk < kSpTile / 16; ++kk) {
      uint32_t pa[4];
      ldmatrix_x4(pa, p_lane + kk * 32);
#pragma unroll
      for (int p = 0; p < kOwn / 2; ++p) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_lane + kk * 16 * L::kVPitch + p * 128);
        mma_bf16(acc[2 * p], pa, vb[0], vb[1]);
        mma_bf16(acc[2 * p + 1], pa, vb[2], vb[3]);
      }
    }
  }
  if (tiles == 0) allow_dependent_launch();
  cp_async_wait<0>();  // (with no tile: the Q copies) no copy may outlive the tile memory's reuse

  // The gates of the output quad this thread stores in the merge's first
  // round (thread q · parts stores quad q), loaded now: their latency hides
  // behind the barrier, and the memory is no longer busy with K and V
  // (issued before the copies they delay the slot chain, behind them they
  // land 0.3 us after the attention; docs/performance.md, twenty-sixth
  // pass). A share past kSpThreads / parts quads loads the rest in the merge.
  // Every thread loads, a thread that stores no quad its group's first
  // (an address that exists): behind a branch nvcc moved the gates'
  // conversion to float up to the loads, and each warp waited for them
  // before its partials' stores.
  uint16_t gate0[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) gate0[e] = gate_at[e];

  // The block's (m, l, O) to the workspace (addresses from before the
  // wait), each pair in one 8-byte store (__stcg's vector form: as plain
  // stores nvcc split the second head row's into two).
#pragma unroll
  for (int j = 0; j < kOwn; ++j) {
    if (rows_ok & 1) __stcg(reinterpret_cast<float2*>(acc_at + j * kSpWarps * 8), make_float2(acc[j][0], acc[j][1]));
    if (rows_ok & 2) __stcg(reinterpret_cast<float2*>(acc_at8 + j * kSpWarps * 8), make_float2(acc[j][2], acc[j][3]));
  }
  if (warp == 0 && tq == 0) {  // every warp holds the same (m, l)
    if (rows_ok & 1) __stcg(reinterpret_cast<float2*>(ml_at), make_float2(m_run[0], l_run[0]));
    if (rows_ok & 2) __stcg(reinterpret_cast<float2*>(ml_at8), make_float2(m_run[1], l_run[1]));
  }
  const uint32_t arrived = pair_arrive(counter, b.j, b.splits);
  if (b.quads == 0) return;  // its arrival was all the others needed of it; it reads nothing of theirs

  // The merge of this block's share. `parts` threads per quad (one warp's
  // consecutive lanes) each load their splits s = part (mod parts) of the
  // quad's partial O and of its head's (m, l) straight into registers, all
  // in flight at once (read through L2: other blocks wrote them); take the
  // head's max M over their splits and then over the parts by shuffles (the
  // same bits in every lane and every block: a max is exact); sum O_s w_s
  // and l_s w_s, w_s = exp(m_s - M), over their splits in order; and add
  // the parts' sums by a shuffle tree, all in fixed orders (deterministic:
  // the same bits whatever the blocks' timing). The quad's first thread
  // stores A = O / L and the gated output. Rounds are uniform over the
  // block, so every lane reaches the shuffles.
  // One warp per scheduler runs this code: nothing hides an instruction's
  // latency but the instructions beside it. So what does not need the
  // partials (the first round's addresses and its gates' sigmoids) runs
  // before the wait, behind the barrier's round trip, and the weights come
  // all at once, not one split at a time: from the release to the outputs
  // 1.1 us instead of 1.9 (docs/performance.md, thirty-third pass).
  // A quad's 4 outputs in one store each where the outputs allow it (out0
  // and e are multiples of 4 elements, so only the bases decide).
  const bool vector_out = reinterpret_cast<uintptr_t>(a.attn) % 16 == 0 && reinterpret_cast<uintptr_t>(a.gated) % 8 == 0;
  MergeLane lane_now = merge_lane(a, b, head0, parts, tid, D);
  MergeGate gate_now = merge_gate(a, OutVec<uint16_t, 4>{{gate0[0], gate0[1], gate0[2], gate0[3]}});
  pin(lane_now, gate_now);
  pair_wait(counter, arrived);
  merge_round<D>(a, lane_now, gate_now, parts, out0, vector_out);
  // Later rounds (a share past kSpThreads / parts quads): the same, each
  // computing its own addresses and loading its own gates.
  for (int t0 = kSpThreads; t0 < parts * b.quads; t0 += kSpThreads) {
    const MergeLane ln = merge_lane(a, b, head0, parts, t0 + tid, D);
    OutVec<uint16_t, 4> gate = {{0, 0, 0, 0}};
    if (ln.stores)
#pragma unroll
      for (int k = 0; k < 4; ++k) gate.v[k] = a.gate[out0 + ln.e + k];
    merge_round<D>(a, ln, merge_gate(a, gate), parts, out0, vector_out);
  }
}

template <int D>
size_t shared_bytes() {
  const size_t need = SpSmem<D>::kBytes;
  // One block per multiprocessor: two would share its copies (one row: 9.1
  // against 9.6 us; docs/performance.md, twenty-third pass).
  return std::max(need, one_block_per_multiprocessor_shared(device_limits()));
}

template <int D>
const void* kernel_of() {
  return reinterpret_cast<const void*>(spread_decode_kernel<D>);
}

// Blocks of the kernel the device holds at once with `bytes` of shared memory.
template <int D>
int64_t resident(size_t bytes) {
  return static_cast<int64_t>(resident_blocks(kernel_of<D>(), kSpThreads, bytes)) * device_limits().multiprocessors;
}

template <int D>
SpreadDecodeShape find_shape(int64_t pairs, int cols, int max_blocks) {
  const int64_t per_sm = std::min<int64_t>(device_limits().multiprocessors / pairs, kMaxSplits);
  if (per_sm < 1 || max_blocks < 1) return {};
  const int tiles = std::max(1, (cols + kSpTile - 1) / kSpTile);
  int blocks = static_cast<int>(std::min<int64_t>({per_sm, tiles, max_blocks}));
  const int ids = std::max(8, ((std::max(cols, 1) + blocks - 1) / blocks + 7) / 8 * 8);
  blocks = std::max(1, (cols + ids - 1) / ids);  // no block without columns
  if (resident<D>(shared_bytes<D>()) < pairs * blocks) return {};
  return {blocks, ids};
}

template <int D>
void launch_typed(const KernelArgs& a, int64_t rows, hipStream_t stream) {
  SpreadArgs sa{};
  // All blocks must be resident at once: they wait for each other.
  if (resident<D>(shared_bytes<D>()) < rows * a.kv_heads * a.splits)
    throw ConfigError("gpu attention: the spread decode kernel's " + std::to_string(rows * a.kv_heads * a.splits) +
                      " blocks do not all fit the device at once");
  if (rows * a.kv_heads > kArrivalRing)
    throw ConfigError("gpu attention: the spread decode kernel's " + std::to_string(rows * a.kv_heads) +
                      " (row, KV group) pairs need more barrier counters than its ring of " +
                      std::to_string(kArrivalRing) + " holds");
  sa.counters = arrival_ring_index(rows * a.kv_heads);
  LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(a.splits), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(rows));
  shape.block = dim3(kSpThreads);
  shape.shared_bytes = shared_bytes<D>();
  launch_dependent(spread_decode_kernel<D>, shape, stream, a, sa);
}

}  // namespace

bool spread_decode_supported(const KernelArgs& a, int head_dim, int group, bool fp8) {
  return !fp8 && mma_decode_supported(a, head_dim, group);
}

SpreadDecodeShape spread_decode_shape(int64_t pairs, int cols, int head_dim, int group, int max_blocks) {
  if (pairs < 1 || pairs > INT_MAX || group < 1 || group > kM) return {};
  switch (head_dim) {
    case 64: return find_shape<64>(pairs, cols, max_blocks);
    case 128: return find_shape<128>(pairs, cols, max_blocks);
    case 256: return find_shape<256>(pairs, cols, max_blocks);
    default: return {};
  }
}

void launch_spread_decode(const KernelArgs& a, int head_dim, int64_t rows, hipStream_t stream) {
  if (rows > 65535) throw ConfigError("gpu attention: the spread decode kernel takes at most 65535 rows");
  if (a.splits > kMaxSplits || a.splits < 1)
    throw ConfigError("gpu attention: the spread decode kernel takes 1 to " + std::to_string(kMaxSplits) +
                      " blocks per (row, KV group), not " + std::to_string(a.splits));
  switch (head_dim) {
    case 64: return launch_typed<64>(a, rows, stream);
    case 128: return launch_typed<128>(a, rows, stream);
    case 256: return launch_typed<256>(a, rows, stream);
    default: throw ConfigError("gpu attention: head_dim " + std::to_string(head_dim) + " has no spread kernel");
  }
}

#else  // AMD: the tensor-core kernels are NVIDIA's

bool spread_decode_supported(const KernelArgs&, int, int, bool) { return false; }
SpreadDecodeShape spread_decode_shape(int64_t, int, int, int, int) { return {}; }
void launch_spread_decode(const KernelArgs&, int, int64_t, hipStream_t) {
  throw ConfigError("gpu attention: the spread decode kernel exists only in CUDA builds");
}

#endif

}  // namespace qsa::gpu::attn
