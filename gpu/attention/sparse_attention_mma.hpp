// Internal interface between the launcher (sparse_attention.hip) and the
// tensor-core kernels, NVIDIA only: decode (sparse_attention_mma.hip, sm_80+)
// and prefill (sparse_attention_mma_prefill.hip: sm_80+, and a Hopper
// version for sm_90a).
// Include only from .hip files.
//
// Same contract and numerics as the portable decode kernel
// (sparse_attention.hpp) for p_rounding = kBf16Unnormalized, the engines'
// choice: fp32 logits, online softmax in fp32 with P rounded to bf16, which
// is exactly the bf16 operand the PV matrix multiply takes. Differences:
//  - the accumulation order of the dot products (the tensor cores' fp32
//    sums over 16-element pieces, in four chains added at the end, two per
//    n8 tile of ids for fp8, over a permutation of the dims for fp8), of
//    the PV sums (8 ids per mma for bf16, 16 for fp8), and of the warps'
//    merge (fused multiply-adds of each warp's unscaled sums and its
//    factor);
//  - exp is the special-function unit's 2^x (relative error ~2^-22), and a
//    row's running max lags (it moves only when a logit passes it by
//    ln 256), so P is rounded relative to that max, not the newest one:
//    the same bf16 rounding bound;
//  - fp8 KV: the scales apply to the sums (k_scale · Σ q·code instead of
//    Σ q·(code·k_scale)), and the mmas take f16 operands: the codes exactly,
//    Q scaled per head row by a power of two (undone exactly), P after its
//    bf16 rounding (exact for P >= 2^-17, rounded to f16's subnormal step
//    below).
// The GPU tests hold it to the same tolerances as the portable kernel.
//
// One block of 8 warps per (row, KV group, split), the group's H/G <= 16
// query heads padded to the 16 rows of the mma tile. Each warp takes a
// contiguous eighth of the split's ids and runs FlashAttention-2 style on
// its own, in steps of 8 ids (bf16) or 16 (fp8), with one block barrier at
// step 0 (Q, copied by the whole block in step 0's group, is then in shared
// memory) and none after it until the end:
//   load    the warp resolves the slots of its next 256 ids in one batch,
//           then copies each step's K and V rows (cp.async, 16 bytes per
//           lane, zero-filled for ids not attended) into its own
//           shared-memory ring (rows swizzled, not padded), 2 steps ahead
//           (3 stages; fp8 rows stay fp8 in shared memory);
//   logits S[16 heads, 8 or 16 ids] = Q K^T (m16n8k16 in four independent
//           chains, Q from shared memory; for fp8, two n8 tiles that share
//           each Q fragment, K fragments converted from the fp8 rows in
//           registers);
//   softmax online, in registers: each head row's logits of an n8 tile
//           sit in one quad of lanes; P rounded to bf16 becomes the A
//           operand of PV without leaving registers;
//   PV      O[16 heads, D] += P V (bf16: m16n8k8 with V through
//           ldmatrix.trans; fp8: m16n8k16, four rows' codes paired by byte
//           permutes); the
//           accumulators are rescaled only when a row's (lagging) max moves.
// At the end the 8 warps' (m, l, O) merge by log-sum-exp in warp order.
// The fp8 format (OCP or AMD's fnuz) is a template parameter, so the step
// loop holds one decoder.
// Splits: the launcher picks how many (at most what the caller's workspace
// allows) so that the grid fills the GPU about once; the portable kernel's
// merge combines them, launched so that it overlaps this kernel's tail
// (dependent_launch.hpp). The kernel itself is launched as a dependent of
// the stream's previous kernel: before waiting for it, it only prefetches
// the row's first dependent reads into L2, so the launch and
// block-scheduling gap is saved (measured -0.8 us at one row) and the first
// loads after the wait hit L2.
#pragma once

#include <cstdint>

#include "gpu/attention/attention_prefill_tile.hpp"
#include "gpu/attention/attention_tile.hpp"
#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/common/device_api.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu::attn {

// Ids per warp step of the tensor-core kernel: 8 for a bf16 cache, 16 for
// fp8 (whose rows take half the shared memory). Splits are whole steps.
constexpr int mma_step_ids(bool fp8) { return fp8 ? 16 : 8; }

// Whether this build and these args can take the tensor-core kernel: a CUDA
// build, head_dim in {64, 128, 256}, H/G <= 16, P rounded to bf16
// (kBf16Unnormalized; a.round_p) and 16-byte aligned q, k_cache, v_cache.
bool mma_decode_supported(const KernelArgs& a, int head_dim, int group);
// The part of that which depends on the params alone (build, head_dim,
// H/G, p_rounding = kBf16Unnormalized).
bool mma_decode_params_supported(int head_dim, int group, PRounding p_rounding);

// Splits the tensor-core kernel wants for `pairs` = rows x KV groups and
// `cols` counted columns: enough blocks to fill the device about once, never
// more than `max_splits` (what the caller's workspace holds) nor so many
// that a warp would get less than one step.
int mma_decode_splits(int64_t pairs, int cols, int max_splits, int head_dim, bool fp8);

// Launches the kernel over `rows` rows; `a` must be complete and checked,
// with a.splits / a.ids_per_split from mma_decode_splits (ws_* set when
// a.splits > 1; the caller runs the merge).
void launch_mma_decode(const KernelArgs& a, int head_dim, int64_t rows, bool fp8, hipStream_t stream);

// The spread decode kernel (sparse_attention_spread.hip; NVIDIA, bf16
// cache), for a few decode rows. There the split-K kernel above spreads each
// row over about half the multiprocessors and a second launch merges the
// splits (one row: 7.8 us of kernel, 2.7 of merge, and 6-9 us of the host's
// time to enqueue the two; docs/performance.md). This kernel spreads each
// (row, KV group) over about one block per multiprocessor (65 blocks of 32
// ids for one row of 2051 ids), because one SM keeps only some 32 KB of
// copies in flight, and merges in the same launch: each block stores its
// partial (m, l, O) to the workspace, the pair's blocks meet at a barrier
// (a counter in global memory; all blocks are resident at once, which the
// launcher checks), and then each block merges a share of the pair's
// outputs over all the blocks' partials. In a block of 4 warps each warp
// copies and scores 8 ids (S = Q K^T as the split-K kernel's step), the
// warps share each head row's max through shared memory and write P =
// bf16(exp(S - m)) for their ids, then each warp multiplies all 32 ids' P by
// V for its own n8 tiles of dims (k16 mmas, P and V by ldmatrix): no warp
// holds a whole output row, so no warps merge. In sm_90a builds each V row
// comes by one bulk copy (Hopper's copy engine) while the K rows come by
// cp.async, so that both copy paths are in flight at once (thirty-first
// pass: 7.48 -> 7.39 us at one row given slots). Same contract and numerics
// as the split-K kernel, except that a tile's P is rounded against the
// block's exact running max (no lag).
// Supported where mma_decode_supported is, for a bf16 cache.
bool spread_decode_supported(const KernelArgs& a, int head_dim, int group, bool fp8);
// Blocks per (row, KV group) and ids per block for `pairs` = rows x KV
// groups, `cols` columns and `group` = H/G heads, with at most `max_blocks`
// blocks per pair (what the workspace holds): about one block per
// multiprocessor, at most 288 per pair (what the merge's registers hold);
// {0, 0} where the pairs' blocks do not all fit the device at once (then
// the split-K kernel runs).
struct SpreadDecodeShape {
  int blocks = 0, ids = 0;
};
SpreadDecodeShape spread_decode_shape(int64_t pairs, int cols, int head_dim, int group, int max_blocks);
// Launches it over `rows` rows with a.splits / a.ids_per_split from
// spread_decode_shape and ws_acc / ws_ml for the blocks' partials
// ([T, H, splits, D] and [T, H, splits, 2]).
void launch_spread_decode(const KernelArgs& a, int head_dim, int64_t rows, hipStream_t stream);
// (kAuto and kDecode take it for at most kSpreadDecodeMaxPairs pairs,
// sparse_attention_validate.hpp.)

// The tensor-core prefill kernel: the plan-based prefill path
// (sparse_attention_plan.hpp) for a bf16 cache. One block of 4 warps per
// (tile, KV group, head chunk); the tile's (row, head) pairs, at most 64,
// are the rows of 4 m16 tiles, one per warp, packed without padding. The
// tile's entries (the union of its rows' ids) go through shared memory once
// for all pairs, 16 per step, in a 4-stage ring that the whole block fills
// (the decode kernel's swizzled tiles); each warp then runs the decode
// kernel's step on its 16 pairs for each n8 tile of the step (the same
// logit mma chains, softmax_row, P rounded to bf16 into the same k8 PV
// mmas), with a pair's logits of
// entries its row does not attend masked to -inf, and stores its pairs
// (no merge: a warp owns whole pairs). Slots and masks are resolved 256
// entries at a time, the next chunk's loads spread over the current one's
// steps. The outputs leave through shared memory (the ring, after the last
// step), a warp per pair row at a time, as vectors. A pair whose output is
// not finite is recomputed exactly, one warp per pair: P = 0 times an inf
// or NaN in a V row its row does not attend (but another row of the tile
// does) would otherwise reach it, and the reference lets a row see only the
// ids it attends.
// Supported: a CUDA build, a bf16 cache, head_dim in {64, 128, 256},
// a.round_p, slots that fit in int32, 16-byte aligned q, k_cache, v_cache,
// gate, attn and gated.
bool mma_prefill_supported(const KernelArgs& a, int head_dim, bool fp8);
// The same from the params alone (the pointers' alignment and the slot
// count are the launch's): what kAuto asks before it prefers the prefill
// path to the tensor-core decode kernel.
bool mma_prefill_params_supported(int head_dim, bool round_p, bool fp8);
// The Hopper version of the same kernel (sm_90a): the block is one
// warpgroup, and its two matrix products per step are warpgroup mmas
// (wgmma) with K and V read straight from shared memory, Q from shared
// memory and P from registers; 32 entries per step, with K and V in rings of
// two tiles each (V copied one step after its K); the masking, softmax,
// rounding and epilogue are the kernel's above. Supported where mma_prefill_supported
// is, in builds with sm_90a device code (QSA_CUDA_SM90A), on a compute
// capability 9.0 device.
bool wgmma_prefill_supported(const KernelArgs& a, int head_dim, bool fp8);
// The same from the params alone (as mma_prefill_params_supported).
bool wgmma_prefill_params_supported(int head_dim, bool round_p, bool fp8);
// Launches one of them over pa's tiles (grid x = tile, y = KV group x head
// chunk): the Hopper kernel with `wgmma` (only where wgmma_prefill_supported),
// else the sm_80 one; pa complete and checked, as for launch_prefill.
void launch_mma_prefill(const PrefillArgs& pa, int64_t num_tiles, int head_dim, bool wgmma, hipStream_t stream);

}  // namespace qsa::gpu::attn
