// validate_trace: what must hold before replay starts. Messages name the
// dataset by its path in the file, and the step by index and name.
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (in ranges.h from fmt 11 on)

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness/trace/trace_fields.hpp"
#include "harness/trace/trace_io.hpp"

namespace qsa {

namespace {

// block_table entries are int32, so more pages cannot be addressed; the cap
// also keeps pages · page_size far from int64 overflow.
constexpr int64_t kMaxAddressable = std::numeric_limits<int32_t>::max();

std::string index_string(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

void require_finite(const TensorD& t, const std::string& name) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.data[i];
    if (!std::isfinite(x))
      throw InputError(fmt::format("{}{} is {}", name, index_string(t.shape, i),
                                   std::isnan(x) ? "NaN" : (x > 0 ? "+inf" : "-inf")));
  }
}

template <class T>
void require_range(const Tensor<T>& t, const std::string& name, int64_t lo, int64_t hi,
                   const std::string& why) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = t.data[i];
    if (v < lo || v >= hi)
      throw InputError(fmt::format("{}{} = {} is out of range [{}, {}) {}", name, index_string(t.shape, i), v,
                                   lo, hi, why));
  }
}

template <class T>
void require_dims(const Tensor<T>& t, const std::string& name, const char* symbolic, const Shape& expected) {
  if (!present(t))
    throw InputError(fmt::format("{} is missing, expected {} = {}", name, symbolic, shape_to_string(expected)));
  if (t.shape != expected)
    throw InputError(fmt::format("{} has shape {}, expected {} = {}", name, shape_to_string(t.shape), symbolic,
                                 shape_to_string(expected)));
}

void require_unique(const TensorI64& slots, const std::string& name) {
  std::vector<int64_t> sorted = slots.data;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) throw InputError(fmt::format("{} holds slot {} twice", name, *dup));
}

void validate_outputs(const QsaConfig& c, const CacheGeometry& g, int64_t T, const RecordedStages& s,
                      const std::string& prefix) {
  const int64_t HI = c.indexer_heads, dI = c.indexer_head_dim, H = c.num_heads, G = c.num_kv_heads,
                D = c.head_dim;
  const auto check = [&](const auto& t, const char* name, const char* symbolic, const Shape& expected) {
    if (present(t)) require_dims(t, prefix + name, symbolic, expected);
  };
  check(s.index_q, "index_q", "[T, H_I, d_I]", {T, HI, dI});
  check(s.raw_keys, "raw_keys", "[T, d_I]", {T, dI});
  check(s.block_ids, "block_ids", "[T, K_B]", {T, c.blocks_budget()});
  check(s.block_scores, "block_scores", "[T, K_B]", {T, c.blocks_budget()});
  check(s.token_idx, "token_idx", c.count_column ? "[T, W + 1]" : "[T, W]", {T, c.index_row_width()});
  check(s.q, "q", "[T, H, D]", {T, H, D});
  check(s.k, "k", "[T, G, D]", {T, G, D});
  check(s.v, "v", "[T, G, D]", {T, G, D});
  check(s.gate, "gate", "[T, H, D]", {T, H, D});
  check(s.attn, "attn", "[T, H, D]", {T, H, D});
  check(s.gated, "gated", "[T, H, D]", {T, H, D});
  check(s.out, "out", "[T, hidden]", {T, c.hidden_size});

  // The comp_* datasets describe the same n rows; the first present one sets n.
  int64_t n = -1;
  std::string n_from;
  for_each_recorded(s, [&](const FieldSpec& spec, const auto& t) {
    if (!present(t) || std::string(spec.name).rfind("comp_", 0) != 0) return;
    if (n < 0) {
      n = t.rank() >= 1 ? t.dim(0) : 0;
      n_from = spec.name;
    }
    const Shape expected = spec.rank == 1 ? Shape{n} : Shape{n, dI};
    if (t.shape != expected)
      throw InputError(fmt::format("{}{} has shape {}, expected {} = {} (n from {}{})", prefix, spec.name,
                                   shape_to_string(t.shape), spec.shape, shape_to_string(expected), prefix,
                                   n_from));
  });
  require_range(s.comp_tokens, prefix + "comp_tokens", 0, T, "(a row of this step)");
  require_range(s.comp_blocks, prefix + "comp_blocks", 0, std::numeric_limits<int64_t>::max(), "");
  require_range(s.comp_slots, prefix + "comp_slots", 0, g.num_pages * c.compressed_rows_per_page(),
                "(compressed cache rows)");
  const int64_t big = std::numeric_limits<int32_t>::max();
  require_range(s.block_ids, prefix + "block_ids", -1, big, "(-1 marks an unused entry)");
  require_range(s.token_idx, prefix + "token_idx", -1, big, "(-1 marks an unused entry)");
}

void validate_step(const QsaConfig& c, const CacheGeometry& g, const TraceStep& step, size_t index) {
  const std::string p = fmt::format("/steps/{:06d}/", index);
  const StepMetadata& m = step.meta;
  const int64_t R = static_cast<int64_t>(m.query_start_loc.size()) - 1;
  const auto check_table = [&](const TensorI32& t, const char* name) {
    if (t.rank() != 2 || t.dim(0) != R)
      throw InputError(fmt::format("{}{} has shape {}, expected [R, pages] with R = {} rows (query_start_loc "
                                   "has {} entries)",
                                   p, name, shape_to_string(t.shape), R, m.query_start_loc.size()));
  };
  // derive_step_layout takes differences of neighbouring entries in int32:
  // with every entry non-negative none can overflow.
  for (size_t i = 0; i < m.query_start_loc.size(); ++i)
    if (m.query_start_loc[i] < 0)
      throw InputError(fmt::format("{}query_start_loc[{}] = {} is negative", p, i, m.query_start_loc[i]));
  check_table(m.block_table, "block_table");
  if (!m.block_table_c.empty()) check_table(m.block_table_c, "block_table_c");
  if (step.hidden.rank() != 2 || step.hidden.dim(1) != c.hidden_size)
    throw InputError(fmt::format("{}hidden has shape {}, expected [T, hidden] with hidden = {}", p,
                                 shape_to_string(step.hidden.shape), c.hidden_size));

  const StepLayout layout = derive_step_layout(c, g, m);
  const int64_t T = layout.num_tokens;
  if (step.hidden.dim(0) != T)
    throw InputError(fmt::format("{}hidden has {} rows but positions has {} columns (T)", p,
                                 step.hidden.dim(0), T));
  require_finite(step.hidden, "hidden");
  validate_outputs(c, g, T, step.recorded, p + "outputs/");
}

void validate_initial_state(const QsaConfig& c, const CacheGeometry& g, const CacheSnapshot& s) {
  const std::string p = "/initial_state/";
  const int64_t G = c.num_kv_heads, D = c.head_dim, dI = c.indexer_head_dim;
  const auto rows = [](const TensorI64& slots) { return present(slots) ? slots.numel() : 0; };
  const auto check = [&](const auto& t, const char* name, const char* symbolic, const Shape& expected) {
    // An absent tensor counts as zero rows, so it must go with absent slots.
    if (present(t) || expected[0] != 0) require_dims(t, p + name, symbolic, expected);
  };
  const int64_t n = rows(s.kv_slots), m = rows(s.ring_slots), k = rows(s.comp_slots);
  check(s.kv_slots, "kv_slots", "[n]", {n});
  check(s.kv_positions, "kv_positions", "[n]", {n});
  check(s.kv_k, "kv_k", "[n, G, D]", {n, G, D});
  check(s.kv_v, "kv_v", "[n, G, D]", {n, G, D});
  check(s.ring_slots, "ring_slots", "[m]", {m});
  check(s.ring_positions, "ring_positions", "[m]", {m});
  check(s.ring_rope, "ring_rope", "[m, 3]", {m, 3});
  check(s.ring_keys, "ring_keys", "[m, d_I]", {m, dI});
  check(s.comp_slots, "comp_slots", "[c]", {k});
  check(s.comp_blocks, "comp_blocks", "[c]", {k});
  check(s.comp_keys, "comp_keys", "[c, d_I]", {k, dI});

  const int64_t any = std::numeric_limits<int64_t>::max();
  require_range(s.kv_slots, p + "kv_slots", 0, g.num_pages * c.page_size, "(main KV slots)");
  require_range(s.ring_slots, p + "ring_slots", 0, g.num_ring_blocks * c.ring_capacity(), "(ring slots)");
  require_range(s.comp_slots, p + "comp_slots", 0, g.num_pages * c.compressed_rows_per_page(),
                "(compressed cache rows)");
  require_range(s.kv_positions, p + "kv_positions", 0, any, "");
  require_range(s.ring_positions, p + "ring_positions", 0, any, "");
  require_range(s.ring_rope, p + "ring_rope", 0, any, "");
  require_range(s.comp_blocks, p + "comp_blocks", 0, any, "");
  require_unique(s.kv_slots, p + "kv_slots");
  require_unique(s.ring_slots, p + "ring_slots");
  require_unique(s.comp_slots, p + "comp_slots");
  require_finite(s.kv_k, p + "kv_k");
  require_finite(s.kv_v, p + "kv_v");
  require_finite(s.ring_keys, p + "ring_keys");
  require_finite(s.comp_keys, p + "comp_keys");
}

}  // namespace

void validate_trace(const Trace& t, const std::string& source) {
  try {
    validate_config(t.config);
  } catch (const ConfigError& e) {
    rethrow_in(e, source + ": /config");
  }
  const CacheGeometry& g = t.geometry;
  if (g.num_pages <= 0 || g.num_ring_blocks <= 0 || g.num_pages > kMaxAddressable ||
      g.num_ring_blocks > kMaxAddressable)
    throw InputError(fmt::format("{}: /geometry num_pages = {} and num_ring_blocks = {} must be in [1, {}]",
                                 source, g.num_pages, g.num_ring_blocks, kMaxAddressable));
  try {
    validate_weights(t.config, t.weights);
    validate_initial_state(t.config, g, t.initial_state);
  } catch (const InputError& e) {
    rethrow_in(e, source);
  }
  for (size_t i = 0; i < t.steps.size(); ++i) {
    try {
      validate_step(t.config, g, t.steps[i], i);
    } catch (const InputError& e) {
      rethrow_in(e, fmt::format("{}: step {} ('{}')", source, i, t.steps[i].name));
    }
  }
}

}  // namespace qsa
