// The optional datasets of a trace, listed once for the writer, the reader and
// the validator: each step's recorded outputs and the initial cache state.
// A tensor is present when it has a rank (a default-constructed tensor has
// none); a present tensor may have zero rows ("recorded: no group completed").
#pragma once

#include <string>

#include "harness/trace/trace.hpp"
#include "reference/core/errors.hpp"

namespace qsa {

struct FieldSpec {
  const char* name;   // dataset name inside its group
  int rank;
  const char* shape;  // for messages: "[T, H_I, d_I]"
  bool fp8_codes;     // stored as fp8 codes when the indexer dtype is fp8
};

template <class T>
bool present(const Tensor<T>& t) {
  return !t.shape.empty();
}

// visit(const FieldSpec&, Tensor<...>&) for every field of RecordedStages, in
// file order. Works on const and non-const stages.
template <class Stages, class Visit>
void for_each_recorded(Stages& s, Visit&& visit) {
  visit(FieldSpec{"index_q", 3, "[T, H_I, d_I]", true}, s.index_q);
  visit(FieldSpec{"raw_keys", 2, "[T, d_I]", false}, s.raw_keys);
  visit(FieldSpec{"comp_tokens", 1, "[n]", false}, s.comp_tokens);
  visit(FieldSpec{"comp_blocks", 1, "[n]", false}, s.comp_blocks);
  visit(FieldSpec{"comp_slots", 1, "[n]", false}, s.comp_slots);
  visit(FieldSpec{"comp_keys", 2, "[n, d_I]", true}, s.comp_keys);
  visit(FieldSpec{"block_ids", 2, "[T, K_B]", false}, s.block_ids);
  visit(FieldSpec{"block_scores", 2, "[T, K_B]", false}, s.block_scores);
  visit(FieldSpec{"token_idx", 2, "[T, W] or [T, W + 1]", false}, s.token_idx);
  visit(FieldSpec{"q", 3, "[T, H, D]", false}, s.q);
  visit(FieldSpec{"k", 3, "[T, G, D]", false}, s.k);
  visit(FieldSpec{"v", 3, "[T, G, D]", false}, s.v);
  visit(FieldSpec{"gate", 3, "[T, H, D]", false}, s.gate);
  visit(FieldSpec{"attn", 3, "[T, H, D]", false}, s.attn);
  visit(FieldSpec{"gated", 3, "[T, H, D]", false}, s.gated);
  visit(FieldSpec{"out", 2, "[T, hidden]", false}, s.out);
}

// visit(const FieldSpec&, TensorD&) for every weight, in file order.
template <class Weights, class Visit>
void for_each_weight(Weights& w, Visit&& visit) {
  visit(FieldSpec{"index_qk_proj", 2, "[(H_I + 1)·d_I, hidden]", false}, w.index_qk_proj);
  visit(FieldSpec{"index_q_norm", 1, "[d_I]", false}, w.index_q_norm);
  visit(FieldSpec{"index_k_norm", 1, "[d_I]", false}, w.index_k_norm);
  visit(FieldSpec{"q_proj", 2, "[H·2D, hidden]", false}, w.q_proj);
  visit(FieldSpec{"k_proj", 2, "[G·D, hidden]", false}, w.k_proj);
  visit(FieldSpec{"v_proj", 2, "[G·D, hidden]", false}, w.v_proj);
  visit(FieldSpec{"q_norm", 1, "[D]", false}, w.q_norm);
  visit(FieldSpec{"k_norm", 1, "[D]", false}, w.k_norm);
  visit(FieldSpec{"o_proj", 2, "[hidden, H·D]", false}, w.o_proj);
}

// The initial state comes in three families whose datasets go together; the
// first of each family holds the slots and sets the row count.
enum class SnapshotFamily { kKv, kRing, kComp };

// visit(SnapshotFamily, const FieldSpec&, Tensor<...>&) for every field of
// CacheSnapshot, family by family, slots first.
template <class Snapshot, class Visit>
void for_each_snapshot(Snapshot& s, Visit&& visit) {
  visit(SnapshotFamily::kKv, FieldSpec{"kv_slots", 1, "[n]", false}, s.kv_slots);
  visit(SnapshotFamily::kKv, FieldSpec{"kv_positions", 1, "[n]", false}, s.kv_positions);
  visit(SnapshotFamily::kKv, FieldSpec{"kv_k", 3, "[n, G, D]", false}, s.kv_k);
  visit(SnapshotFamily::kKv, FieldSpec{"kv_v", 3, "[n, G, D]", false}, s.kv_v);
  visit(SnapshotFamily::kRing, FieldSpec{"ring_slots", 1, "[m]", false}, s.ring_slots);
  visit(SnapshotFamily::kRing, FieldSpec{"ring_positions", 1, "[m]", false}, s.ring_positions);
  visit(SnapshotFamily::kRing, FieldSpec{"ring_rope", 2, "[m, 3]", false}, s.ring_rope);
  visit(SnapshotFamily::kRing, FieldSpec{"ring_keys", 2, "[m, d_I]", false}, s.ring_keys);
  visit(SnapshotFamily::kComp, FieldSpec{"comp_slots", 1, "[c]", false}, s.comp_slots);
  visit(SnapshotFamily::kComp, FieldSpec{"comp_blocks", 1, "[c]", false}, s.comp_blocks);
  visit(SnapshotFamily::kComp, FieldSpec{"comp_keys", 2, "[c, d_I]", true}, s.comp_keys);
}

// Rethrows `e` as the same kind of error with `context + ": "` in front.
[[noreturn]] inline void rethrow_in(const QsaError& e, const std::string& context) {
  const std::string msg = context + ": " + e.what();
  switch (e.kind()) {
    case ErrorKind::kConfig: throw ConfigError(msg);
    case ErrorKind::kInput: throw InputError(msg);
    case ErrorKind::kIo: throw IoError(msg);
    case ErrorKind::kInternal: break;
  }
  throw InternalError(msg);
}

}  // namespace qsa
