// Minimal bytes and FLOPs of each QSA kernel for one step shape: the one
// formula behind the benchmarks' counters and floors (qsa_bench_gpu,
// qsa_bench_cpu) and the reports (scripts/compare_bench.py and
// docs/performance.md read the counters, they never recompute them).
//
// Minimal bytes: every input a kernel's contract needs read once from DRAM and
// every output it must produce written once. Data a kernel could keep on chip
// (the select score scratch, split-K partials) is not counted, and neither is
// a re-read of the same byte (shared compressed keys of prefill rows, KV
// tokens two rows both attend). FLOPs: 2 per multiply-add of the dot products
// (the work a matrix unit can do); softmax, norms, RoPE and top-k comparisons
// are not counted. The floor of a kernel is then
//   max(bytes / copy bandwidth, flops / matrix rate).
// docs/performance.md ("Method") lists every term.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/config.hpp"

namespace qsa::bench {

// One request of a step: `context` tokens cached before it, `query_len`
// tokens in it at positions context .. context + query_len - 1.
struct RequestChunk {
  int64_t context = 0;
  int64_t query_len = 1;
  int64_t seq_len() const { return context + query_len; }  // L
};

struct StepShape {
  std::vector<RequestChunk> requests;
  int64_t rows() const;  // T (no padding rows)
};

// `batch` requests with one row each at position `context` (L = context + 1).
StepShape decode_shape(int batch, int64_t context);
// One request with `chunk` rows after `context` cached tokens.
StepShape prefill_shape(int64_t chunk, int64_t context);

struct KernelCost {
  double bytes = 0.0;
  double flops = 0.0;
  KernelCost& operator+=(const KernelCost& o) {
    bytes += o.bytes;
    flops += o.flops;
    return *this;
  }
};

// Stored bytes of one element: bf16 2, fp8 1. ConfigError for Octave KV,
// whose slots are packed per (token, head) and which no kernel here reads.
int indexer_element_bytes(IndexerDtype dtype);
int kv_element_bytes(KvDtype dtype);

// Per-row facts of the reference's semantics (spec sections 5 and 6).
// Visible blocks V(p) = max(0, min((p+1) div r, L div r)); attended tokens
// min(V, K_B)·r plus the open group's tail p + 1 - ((p+1) div r)·r.
int64_t visible_blocks_at(const QsaConfig& c, int64_t p, int64_t seq_len);
int64_t attended_tokens_at(const QsaConfig& c, int64_t p, int64_t seq_len);
// A lower bound on the distinct KV tokens a step attends: per request,
// min(L, sum of its rows' attended tokens). Exact for decode (one row per
// request); a benchmark that knows its ids passes the exact union instead.
int64_t attended_kv_tokens(const QsaConfig& c, const StepShape& s);

// Scores + top-k (gpu/select): per request the compressed keys of its
// visible blocks (L div r rows of d_I) and the block-table entries of their
// pages; per row the indexer query, token_to_req and V, and the K_B ids and
// fp32 scores written. FLOPs 2·H_I·d_I·V(p) per row. Uses c.indexer_dtype.
KernelCost select_cost(const QsaConfig& c, const StepShape& s);

// Expansion (gpu/expand): per row K_B int32 ids and an int64 position read,
// c.index_row_width() int32 token ids written. No FLOPs.
KernelCost expand_cost(const QsaConfig& c, const StepShape& s);

// Sparse attention with the gate epilogue (gpu/attention): per row Q and gate
// (bf16 [H, D] each), the token-index row and token_to_req read, A (fp32) and
// O (bf16) written; per request seq_len and the block-table entries of its
// ceil(L / P) pages; K and V of every distinct attended token (G·D each, in
// c.kv_dtype). FLOPs 4·H·D per attended token and row (QK and PV).
// unique_kv_tokens < 0 uses attended_kv_tokens(c, s).
KernelCost attention_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens = -1);

// y[rows, out] = x[rows, in] · w[out, in]^T, all bf16: x, w read, y written.
KernelCost projection_cost(int64_t rows, int in_dim, int out_dim);
// The layer's input projections (index_qk_proj, q_proj, k_proj, v_proj as
// one GEMM over the concatenated weights: hidden read once) and o_proj.
KernelCost input_projections_cost(const QsaConfig& c, const StepShape& s);
KernelCost output_projection_cost(const QsaConfig& c, const StepShape& s);

// Everything between the projections and the selection (spec sections 2-4):
// norms, RoPE and the indexer-dtype store of the indexer Q, norm and RoPE of
// main Q and K, the main KV cache writes, pooling of completed groups into
// the compressed cache, and the raw-key ring. Reads the projection outputs
// (indexer Q and raw key, main Q without the gate, K, V: bf16), the norm
// weights and positions, the older members of a group that straddles the
// chunk start from the ring; writes the indexer Q (indexer dtype), main Q
// (bf16), K and V (c.kv_dtype), each completed group's compressed row
// (indexer dtype) and the last C raw keys of each request (bf16). No FLOPs.
KernelCost prepare_cost(const QsaConfig& c, const StepShape& s);

// The launches of a step between the input projections and o_proj, as the
// GPU step driver issues them: prepare, select, expand, attention (with the
// gate). The sum of the four kernels' costs, so the intermediates that pass
// through DRAM between launches (indexer Q, main Q and gate, block ids, token
// ids) count once written and once read. unique_kv_tokens as in
// attention_cost.
KernelCost step_no_gemm_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens = -1);

// One QSA layer step: input projections, step_no_gemm_cost and o_proj.
KernelCost step_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens = -1);

// A device-to-device copy of `bytes`: read plus written.
KernelCost copy_cost(double bytes);

// max(bytes / copy_bytes_per_second, flops / matrix_flops_per_second).
double floor_seconds(const KernelCost& cost, double copy_bytes_per_second, double matrix_flops_per_second);

}  // namespace qsa::bench
