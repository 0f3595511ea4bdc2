// Trace v1 in memory: one QSA layer, its weights, an optional initial cache
// state and a sequence of steps with their inputs and, optionally, the
// outputs an engine (or the reference) recorded for each stage. The HDF5
// layout is in docs/trace-format.md; trace_io.hpp reads and writes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"
#include "reference/stage_record.hpp"
#include "reference/weights.hpp"

namespace qsa {

inline constexpr int kTraceSchemaVersion = 1;

// What the caches held before step 0: every written entry with the values
// that were written (decoded bf16/fp8 values; the exact input for Octave, so
// re-encoding reproduces the codes) and its tag.
struct CacheSnapshot {
  TensorI64 kv_slots;        // [n_kv] main KV slots
  TensorI64 kv_positions;    // [n_kv] position tag of each
  TensorD kv_k;              // [n_kv, G, D]
  TensorD kv_v;              // [n_kv, G, D]
  TensorI64 ring_slots;      // [n_ring]
  TensorI64 ring_positions;  // [n_ring]
  TensorI64 ring_rope;       // [n_ring, 3]
  TensorD ring_keys;         // [n_ring, d_I]
  TensorI64 comp_slots;      // [n_comp]
  TensorI64 comp_blocks;     // [n_comp] block id tag
  TensorD comp_keys;         // [n_comp, d_I]
  bool empty() const { return kv_slots.empty() && ring_slots.empty() && comp_slots.empty(); }
};

// Per-stage outputs of one step; an empty tensor means "not recorded".
using RecordedStages = StageRecord;

struct TraceStep {
  std::string name;       // free text, e.g. "decode 3"
  StepMetadata meta;
  TensorD hidden;         // [T, hidden_size]
  RecordedStages recorded;
};

struct Trace {
  int schema_version = kTraceSchemaVersion;
  std::string producer;          // e.g. "qsa gen", "record_hf_trace.py"
  std::string producer_version;  // e.g. "qsa 0.1.0", "transformers 5.17.0"
  uint64_t seed = 0;
  std::string description;
  QsaConfig config;
  CacheGeometry geometry;
  LayerWeights weights;
  CacheSnapshot initial_state;
  std::vector<TraceStep> steps;
};

}  // namespace qsa
