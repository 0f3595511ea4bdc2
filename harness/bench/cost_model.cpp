#include "harness/bench/cost_model.hpp"

#include <algorithm>

#include "reference/core/errors.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::bench {

namespace {

constexpr double kBf16Bytes = 2.0;
constexpr double kI32Bytes = 4.0;
constexpr double kI64Bytes = 8.0;
constexpr double kF32Bytes = 4.0;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Position of the last row of a request: its largest V and its whole context.
int64_t last_pos(const RequestChunk& q) { return q.seq_len() - 1; }

}  // namespace

int64_t StepShape::rows() const {
  int64_t t = 0;
  for (const RequestChunk& q : requests) t += q.query_len;
  return t;
}

StepShape decode_shape(int batch, int64_t context) {
  return StepShape{std::vector<RequestChunk>(static_cast<size_t>(batch), RequestChunk{context, 1})};
}

StepShape prefill_shape(int64_t chunk, int64_t context) { return StepShape{{RequestChunk{context, chunk}}}; }

int indexer_element_bytes(IndexerDtype dtype) { return dtype == IndexerDtype::kFp8 ? 1 : 2; }

int kv_element_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kBf16: return 2;
    case KvDtype::kFp8: return 1;
    default: throw ConfigError("cost model: KV dtype " + to_string(dtype) + " has no per-element size");
  }
}

int64_t visible_blocks_at(const QsaConfig& c, int64_t p, int64_t seq_len) {
  return visible_blocks(p, seq_len, c.compress_ratio);
}

int64_t attended_tokens_at(const QsaConfig& c, int64_t p, int64_t seq_len) {
  const int64_t r = c.compress_ratio;
  const int64_t n_exp = std::min<int64_t>(visible_blocks_at(c, p, seq_len), c.blocks_budget()) * r;
  const int64_t n_tail = p + 1 - ((p + 1) / r) * r;
  return n_exp + n_tail;
}

int64_t attended_kv_tokens(const QsaConfig& c, const StepShape& s) {
  int64_t total = 0;
  for (const RequestChunk& q : s.requests) {
    int64_t sum = 0;
    for (int64_t p = q.context; p < q.seq_len(); ++p) sum += attended_tokens_at(c, p, q.seq_len());
    total += std::min(sum, q.seq_len());
  }
  return total;
}

KernelCost select_cost(const QsaConfig& c, const StepShape& s) {
  const double e = indexer_element_bytes(c.indexer_dtype);
  const double query = 1.0 * c.indexer_heads * c.indexer_head_dim * e;
  const double per_row = query + 2 * kI32Bytes + c.blocks_budget() * (kI32Bytes + kF32Bytes);
  KernelCost cost;
  for (const RequestChunk& q : s.requests) {
    const int64_t v_max = visible_blocks_at(c, last_pos(q), q.seq_len());
    cost.bytes += static_cast<double>(v_max) * c.indexer_head_dim * e +
                  static_cast<double>(ceil_div(v_max, c.compressed_rows_per_page())) * kI32Bytes +
                  static_cast<double>(q.query_len) * per_row;
    for (int64_t p = q.context; p < q.seq_len(); ++p)
      cost.flops += 2.0 * c.indexer_heads * c.indexer_head_dim * static_cast<double>(visible_blocks_at(c, p, q.seq_len()));
  }
  return cost;
}

KernelCost expand_cost(const QsaConfig& c, const StepShape& s) {
  const double per_row = c.blocks_budget() * kI32Bytes + kI64Bytes + c.index_row_width() * kI32Bytes;
  return {static_cast<double>(s.rows()) * per_row, 0.0};
}

KernelCost attention_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens) {
  const double hd = 1.0 * c.num_heads * c.head_dim;
  const double per_row = 2 * hd * kBf16Bytes + c.index_row_width() * kI32Bytes + kI32Bytes + hd * (kF32Bytes + kBf16Bytes);
  const double per_token = 2.0 * c.num_kv_heads * c.head_dim * kv_element_bytes(c.kv_dtype);
  if (unique_kv_tokens < 0) unique_kv_tokens = attended_kv_tokens(c, s);
  KernelCost cost;
  cost.bytes = static_cast<double>(s.rows()) * per_row + static_cast<double>(unique_kv_tokens) * per_token;
  for (const RequestChunk& q : s.requests) {
    cost.bytes += kI32Bytes + static_cast<double>(ceil_div(q.seq_len(), c.page_size)) * kI32Bytes;
    for (int64_t p = q.context; p < q.seq_len(); ++p)
      cost.flops += 4.0 * hd * static_cast<double>(attended_tokens_at(c, p, q.seq_len()));
  }
  return cost;
}

KernelCost projection_cost(int64_t rows, int in_dim, int out_dim) {
  const double r = static_cast<double>(rows), in = in_dim, out = out_dim;
  return {(r * in + out * in + r * out) * kBf16Bytes, 2.0 * r * in * out};
}

KernelCost input_projections_cost(const QsaConfig& c, const StepShape& s) {
  const int out = (c.indexer_heads + 1) * c.indexer_head_dim + 2 * c.num_heads * c.head_dim +
                  2 * c.num_kv_heads * c.head_dim;
  return projection_cost(s.rows(), c.hidden_size, out);
}

KernelCost output_projection_cost(const QsaConfig& c, const StepShape& s) {
  return projection_cost(s.rows(), c.num_heads * c.head_dim, c.hidden_size);
}

KernelCost prepare_cost(const QsaConfig& c, const StepShape& s) {
  const double e_i = indexer_element_bytes(c.indexer_dtype), e_kv = kv_element_bytes(c.kv_dtype);
  const double dI = c.indexer_head_dim, hI = c.indexer_heads, D = c.head_dim, H = c.num_heads, G = c.num_kv_heads;
  const int64_t r = c.compress_ratio;
  const double in_row = ((hI + 1) * dI + H * D + 2 * G * D) * kBf16Bytes + kI64Bytes;
  const double out_row = hI * dI * e_i + H * D * kBf16Bytes + 2 * G * D * e_kv;
  KernelCost cost;
  cost.bytes = (2 * dI + 2 * D) * kBf16Bytes;  // the four norm weights
  for (const RequestChunk& q : s.requests) {
    const int64_t L = q.seq_len();
    const int64_t completed = L / r - q.context / r;
    const int64_t first_page = q.context / c.page_size, last_page = (L - 1) / c.page_size;
    // A group that straddles the chunk start and completes in it reads its
    // older members from the ring.
    const int64_t from_ring = (q.context % r != 0 && (q.context / r + 1) * r <= L) ? q.context % r : 0;
    const int64_t ring_writes = std::min<int64_t>(q.query_len, c.ring_capacity());
    cost.bytes += static_cast<double>(q.query_len) * (in_row + out_row) +
                  static_cast<double>(last_page - first_page + 1) * kI32Bytes +
                  static_cast<double>(from_ring) * dI * kBf16Bytes + static_cast<double>(completed) * dI * e_i +
                  static_cast<double>(ring_writes) * dI * kBf16Bytes;
  }
  return cost;
}

KernelCost step_no_gemm_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens) {
  KernelCost cost = prepare_cost(c, s);
  cost += select_cost(c, s);
  cost += expand_cost(c, s);
  cost += attention_cost(c, s, unique_kv_tokens);
  return cost;
}

KernelCost step_cost(const QsaConfig& c, const StepShape& s, int64_t unique_kv_tokens) {
  KernelCost cost = input_projections_cost(c, s);
  cost += step_no_gemm_cost(c, s, unique_kv_tokens);
  cost += output_projection_cost(c, s);
  return cost;
}

KernelCost copy_cost(double bytes) { return {2.0 * bytes, 0.0}; }

double floor_seconds(const KernelCost& cost, double copy_bytes_per_second, double matrix_flops_per_second) {
  const double mem = copy_bytes_per_second > 0 ? cost.bytes / copy_bytes_per_second : 0.0;
  const double math = matrix_flops_per_second > 0 ? cost.flops / matrix_flops_per_second : 0.0;
  return std::max(mem, math);
}

}  // namespace qsa::bench
