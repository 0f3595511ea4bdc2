// Sparse GQA attention over the paged main KV cache with the sigmoid gate as
// epilogue (spec section 7; reference/attention.hpp + gate.hpp), through a
// decode and a prefill path (AttentionPath). The prefill kernel, its plan
// and its limits are described in sparse_attention_plan.hpp; it has the
// numerics below (fp32 logits and online softmax, the P and logit rounding
// knobs, the same epilogue and invalid-id rules) in 32-entry tiles.
//
// Decode kernel: one thread block per (row, KV group g, chunk of up to 16 of the group's
// query heads, split): every K/V row is read once for all heads of a group
// of up to 16 (H/G = 12 for the released model). Per tile of 128 ids:
//   logits  one thread per id: S = (Q_h . K) in fp32, times D^-1/2
//           (with p.round_logits: bf16(bf16(QK) * scale));
//   softmax one wave per head: online max m and sum l in fp32;
//           P = exp(S - m_running), rounded to bf16 with kBf16Unnormalized
//           while l sums the unrounded values;
//   PV      threads over (id lane, 4 dims): acc = acc * exp(m_old - m_new) + sum P V.
// Rows with more than ids_per_split counted columns are split; a second
// kernel merges the partial (m, l, acc) by log-sum-exp.
//
// On NVIDIA the decode path runs a tensor-core kernel instead wherever it
// applies (sparse_attention_mma.hpp: bf16-unnormalised P, head_dim 64/128/
// 256, H/G <= 16, aligned pointers): same contract and knobs, fp32
// accumulation in mma order; it picks its own split count within the
// caller's workspace; for a few rows, a spread kernel that merges a row's
// splits in the same launch (spread_attention_size below).
// AttentionPath::kDecodePortable forces the kernel described above.
//
// p_rounding = kBf16Normalized (hf-eager) runs on the decode path only, as
// a stats pass (m, l) then a PV pass with P = bf16(exp(S - m) / l) against
// the row's global m and l (sparse_attention_normalized.hpp); kAuto never
// takes the prefill path for it.
//
// Precision: with P rounded to bf16 the kernel rounds exp(S - m) against the
// running (tile or split) max and rescales afterwards, as online-softmax
// engines do; the reference rounds exp(S - max) against the row's global
// max. The two differ by at most one bf16 ulp per weight (each is within
// half an ulp of the unrounded weight), i.e. |dA| <= 2^-7 max|V|.
//
// Ids that are -1, outside [0, seq_len), past the count column's bound, on a
// page beyond block_table's columns or on an unmapped page (-1) contribute
// nothing; rows with no such id and padding rows (token_to_req = -1) output
// A = 0. Outputs: A as fp32 (bf16-rounded when p.round_output, so it equals
// the reference stage output), and O = bf16(A * sigmoid(gate)) as bf16 bits
// (sigmoid rounded to bf16 first with gp.round_sigmoid); O is always stored
// in bf16, the activation dtype.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/attention/sparse_attention_plan.hpp"
#include "gpu/attention/sparse_attention_validate.hpp"
#include "gpu/common/device_api.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa::gpu {

// Device pointers of one launch (T = dims.num_tokens, H = p.heads,
// G = p.kv_heads, D = p.head_dim, R = dims.num_reqs).
struct SparseAttentionArgs {
  const uint16_t* q = nullptr;            // [T, H, D] bf16 bits
  const uint16_t* gate = nullptr;         // [T, H, D] bf16 bits
  const int32_t* token_idx = nullptr;     // [T, p.index_width] request-relative ids, -1 padding
  // Optional: each id's main-cache slot, [T, p.index_width], exactly
  // reference token_slots of these inputs (reference/expand.hpp; launch_expand
  // writes it beside the ids; validate_token_slots checks host copies). The
  // spread kernel then reads it instead of token_idx and block_table: one
  // array, no table lookup on the way to the first K and V copies
  // (docs/performance.md, twenty-ninth pass). The other kernels read the ids.
  const int32_t* token_slots = nullptr;
  const int32_t* token_to_req = nullptr;  // [T], -1 for padding rows
  const int32_t* seq_lens = nullptr;      // [R]
  const int32_t* block_table = nullptr;   // [R, dims.max_pages], -1 = unmapped page
  const void* k_cache = nullptr;          // [kv.num_pages * page_size, G, D]: bf16 bits (uint16_t) for
  const void* v_cache = nullptr;          //   kv.dtype bf16, fp8 e4m3 codes (uint8_t, value = code * scale) for fp8
  float* attn = nullptr;                  // [T, H, D] output A
  uint16_t* gated = nullptr;              // [T, H, D] output O, bf16 bits
  float* workspace = nullptr;             // sparse_attention_workspace_floats(...) floats, 16-byte aligned
  size_t workspace_floats = 0;            //   (may be null if 0); the decode path only
  // The prefill path's plan (plan_sparse_attention_prefill), uploaded by the
  // caller; leave null for the decode path (kAuto then never takes prefill).
  const int32_t* prefill_tiles = nullptr;   // [prefill_num_tiles, 4] = plan.tiles
  const int32_t* prefill_ids = nullptr;     // [prefill_num_entries] = plan.ids
  const uint32_t* prefill_masks = nullptr;  // [prefill_num_entries] = plan.masks
  int64_t prefill_num_tiles = 0;            // plan.num_tiles()
  int64_t prefill_num_entries = 0;          // plan.num_entries()
  int prefill_rows_per_tile = 0;            // plan.rows_per_tile
  int64_t prefill_row_ids = 0;              // plan.row_ids: kAuto's measure of reuse (0: unknown, decode)
};

// The path launch_sparse_attention runs for `path` and these args (kAuto as
// described at AttentionPath).
AttentionPath resolve_attention_path(const SparseAttentionDims& dims, const SparseAttentionArgs& args,
                                     AttentionPath path);
// The same for params p and KV dtype kv: with p.p_rounding = kBf16Normalized
// always the decode path (the prefill kernel does not implement it; kPrefill
// asked for explicitly is a ConfigError). Where the build has the
// tensor-core decode kernel for p (tensor_core_attention_available), kAuto
// takes the prefill path only where a tensor-core prefill kernel runs
// (tensor_core_prefill_available) and the plan's rows share their
// selections (sparse_attention_prefill_min_reuse); the portable prefill
// kernel never beats the tensor-core decode one. Otherwise as above.
AttentionPath resolve_attention_path(const AttentionParams& p, KvDtype kv, const SparseAttentionDims& dims,
                                     const SparseAttentionArgs& args, AttentionPath path);

// Whether this build has the tensor-core decode kernel for params p
// (sparse_attention_mma.hpp): CUDA, bf16-unnormalised P, head_dim 64, 128 or
// 256, H/G <= 16.
bool tensor_core_attention_available(const AttentionParams& p);

// Whether this build has a tensor-core prefill kernel for params p and KV
// dtype kv (sparse_attention_mma.hpp: CUDA, a bf16 cache, bf16-unnormalised
// P, head_dim 64, 128 or 256); the launch also needs 16-byte aligned
// pointers, else the portable prefill kernel runs.
bool tensor_core_prefill_available(const AttentionParams& p, KvDtype kv);

// The plan reuse (row_ids / entries) from which kAuto prefers the prefill
// path to the tensor-core decode kernel: kAttentionPrefillMinReuseHopper
// where the Hopper prefill kernel runs for p and kv (this build and
// device), else kAttentionPrefillMinReuse (sparse_attention_plan.hpp).
double sparse_attention_prefill_min_reuse(const AttentionParams& p, KvDtype kv);

// Whether kAuto can resolve to a prefill path for params p and KV dtype kv
// with some plan (resolve_attention_path above): never with hf-eager's
// normalised P; next to the tensor-core decode kernel only where a
// tensor-core prefill kernel exists. Callers build a plan only then.
bool auto_may_take_prefill(const AttentionParams& p, KvDtype kv);

// The splits of each row the tensor-core decode kernel takes for `rows` rows
// of params p and KV dtype `kv` on the current device: enough blocks to fill
// the device about once, at least one step of ids per warp, never more than
// sparse_attention_splits(p, ids_per_split); 0 where the kernel is not
// available for p.
int tensor_core_attention_splits(const AttentionParams& p, KvDtype kv, int64_t rows,
                                 int ids_per_split = kDefaultIdsPerSplit);

// Blocks per (row, KV group) of the spread decode kernel
// (sparse_attention_mma.hpp) for `rows` rows of params p and KV dtype kv on
// the current device, where `path` (kAuto, kDecode or kDecodeSpread) takes
// it: kAuto and kDecode for at most kSpreadDecodeMaxPairs (row, KV group)
// pairs, kDecodeSpread for any number the device holds at once, with
// `workspace_floats` of workspace (no more blocks per pair than it holds:
// spread_workspace_floats_per_block each). 0 where the launch takes
// another kernel (or, for kDecodeSpread, fails).
// The spread kernel's blocks wait for each other, so all of a launch's
// blocks must be resident at once: the launcher checks the occupancy, but
// two launches of it running at the same time on two streams of one device
// could each hold part of the GPU and wait, until a block gives up after
// seconds of polling and traps: the launch then fails with a launch error,
// which ends the process's CUDA context. A caller that runs
// attention for one decode row on several streams at once passes
// AttentionPath::kDecodeSplitK. (A cooperative launch would let the driver
// place them; it measured 10.5 us against 8.8: docs/performance.md,
// twenty-third pass.)
int spread_attention_size(const AttentionParams& p, KvDtype kv, int64_t rows,
                          AttentionPath path = AttentionPath::kAuto, size_t workspace_floats = SIZE_MAX);

// Runs the attention and the gate on `stream`. The index inputs must have
// passed validate_sparse_attention (which returns `dims`); the kernel guards
// cheap bounds as well, so bad ids can never make it read out of bounds.
// k_cache, v_cache and the workspace must be 16-byte aligned (hipMalloc's
// are); null pointers, a short workspace (decode path), a missing plan or one built for
// other params (prefill path) and dims that contradict kv are InputErrors.
// ids_per_split only shapes the decode path (the prefill path has no
// split-K and no workspace).
void launch_sparse_attention(const AttentionParams& p, const GateParams& gp, const KvCacheParams& kv,
                             const SparseAttentionDims& dims, const SparseAttentionArgs& args, hipStream_t stream,
                             int ids_per_split = kDefaultIdsPerSplit, AttentionPath path = AttentionPath::kAuto);

}  // namespace qsa::gpu
