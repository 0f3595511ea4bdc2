// The device tensors of gpu::launch_prepare for the benchmarks that launch
// it (prepare_bench, step_bench), one set per rotated input set where the
// launch reads or writes per step, one shared set where it is persistent
// state (caches, ring, norm weights). Kept in one place so that both
// benchmarks hand the kernel the same shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/common/device_api.hpp"
#include "gpu/prepare/prepare.hpp"
#include "harness/bench/cost_model.hpp"
#include "harness/bench/gpu/device_slab.hpp"
#include "harness/bench/gpu/gpu_env.hpp"
#include "reference/core/config.hpp"
#include "reference/core/step_layout.hpp"

namespace qsa::bench {

struct PrepareSlabs {
  // Index inputs, one set per input set (derive_step_layout's fields).
  Slab<int32_t> token_to_req, starts, ring_blocks;
  Slab<int64_t> pos, rope_pos, main_slot, ring_slot, compressed_slot;
  // Value inputs, one set per input set: the projection outputs (fp32
  // holding bf16 values).
  Slab<float> index_qk, qg, k, v;
  // Shared: norm weights (index_q, index_k, q, k one after another), ring.
  Slab<float> norm_w, ring_keys;
  Slab<int64_t> ring_rope;
  // Shared caches, in bytes (codes of the indexer / KV dtype).
  Slab<uint8_t> compressed, k_cache, v_cache;
  // Outputs, one set per input set.
  Slab<uint8_t> index_q;
  Slab<uint16_t> q, k_out, gate;

  // Host side: append input set `l`'s index inputs; upload() once all are in.
  void add(const StepLayout& l) {
    token_to_req.add(l.token_to_req);
    starts.add(l.starts);
    ring_blocks.add(l.ring_blocks);
    pos.add(l.pos);
    rope_pos.add(l.rope_pos.data);
    main_slot.add(l.main_slot);
    ring_slot.add(l.ring_slot);
    compressed_slot.add(l.compressed_slot);
  }
  void upload() {
    for (auto* s : {&token_to_req, &starts, &ring_blocks}) s->upload();
    for (auto* s : {&pos, &rope_pos, &main_slot, &ring_slot, &compressed_slot}) s->upload();
  }

  // Allocates the value inputs, outputs and shared state for `copies` input
  // sets of `layout` under `c`. Fills the norm weights and ring keys with
  // random values (keys "<prefix>.norm_weights", "<prefix>.ring_keys") and
  // zeroes the ring's RoPE positions (read only for groups straddling a
  // chunk start, which the benchmarks' shapes have none of). The value
  // inputs (fill_inputs) and the caches are left to the caller.
  void allocate(const QsaConfig& c, const gpu::PrepareLayout& layout, int copies, std::string_view prefix) {
    dI_ = c.indexer_head_dim;
    D_ = c.head_dim;
    const int HI = c.indexer_heads, H = c.num_heads, G = c.num_kv_heads;
    const int64_t T = layout.num_tokens;
    const size_t e_kv = static_cast<size_t>(kv_element_bytes(c.kv_dtype));
    const size_t e_ix = static_cast<size_t>(indexer_element_bytes(c.indexer_dtype));
    index_qk.allocate(copies, sz(T, (HI + 1) * dI_));
    qg.allocate(copies, sz(T, 2 * H * D_));
    k.allocate(copies, sz(T, G * D_));
    v.allocate(copies, sz(T, G * D_));
    norm_w.allocate(1, sz(2, dI_ + D_));
    ring_keys.allocate(1, sz(layout.num_ring_slots, dI_));
    norm_w.fill(FillKind::kF32, key(prefix, "norm_weights"));
    ring_keys.fill(FillKind::kF32, key(prefix, "ring_keys"));
    ring_rope.allocate(1, sz(layout.num_ring_slots, 3));
    QSA_GPU_CHECK(
        hipMemsetAsync(ring_rope.at(0), 0, sz(layout.num_ring_slots, 3) * sizeof(int64_t), gpu_env().stream));
    compressed.allocate(1, sz(layout.num_compressed_rows, dI_) * e_ix);
    k_cache.allocate(1, sz(layout.num_kv_slots, G * D_) * e_kv);
    v_cache.allocate(1, sz(layout.num_kv_slots, G * D_) * e_kv);
    index_q.allocate(copies, sz(T, HI * dI_) * e_ix);
    q.allocate(copies, sz(T, H * D_));
    k_out.allocate(copies, sz(T, G * D_));
    gate.allocate(copies, sz(T, H * D_));
  }

  // Random fp32 value inputs (keys "<prefix>.index_qk", ".qg", ".k", ".v"),
  // for a launch not fed by the projections.
  void fill_inputs(std::string_view prefix) {
    index_qk.fill(FillKind::kF32, key(prefix, "index_qk"));
    qg.fill(FillKind::kF32, key(prefix, "qg"));
    k.fill(FillKind::kF32, key(prefix, "k"));
    v.fill(FillKind::kF32, key(prefix, "v"));
  }

  // The launch's pointers for input set `set`. Not const: Slab::at is not.
  gpu::PrepareArgs args(int set) {
    gpu::PrepareArgs a;
    a.index_qk = index_qk.at(set);
    a.qg = qg.at(set);
    a.k = k.at(set);
    a.v = v.at(set);
    a.index_q_norm_w = norm_w.at(0);
    a.index_k_norm_w = norm_w.at(0) + dI_;
    a.q_norm_w = norm_w.at(0) + 2 * dI_;
    a.k_norm_w = norm_w.at(0) + 2 * dI_ + D_;
    a.token_to_req = token_to_req.at(set);
    a.pos = pos.at(set);
    a.rope_pos = rope_pos.at(set);
    a.main_slot = main_slot.at(set);
    a.ring_slot = ring_slot.at(set);
    a.compressed_slot = compressed_slot.at(set);
    a.starts = starts.at(set);
    a.ring_blocks = ring_blocks.at(set);
    a.ring_keys = ring_keys.at(0);
    a.ring_rope = ring_rope.at(0);
    a.compressed = compressed.at(0);
    a.k_cache = k_cache.at(0);
    a.v_cache = v_cache.at(0);
    a.index_q = index_q.at(set);
    a.q = q.at(set);
    a.k_out = k_out.at(set);
    a.gate = gate.at(set);
    return a;
  }

 private:
  static size_t sz(int64_t a, int64_t b) { return static_cast<size_t>(a) * static_cast<size_t>(b); }
  static std::string key(std::string_view prefix, std::string_view tensor) {
    return std::string(prefix) + "." + std::string(tensor);
  }

  int dI_ = 0;  // norm weight offsets: index_q at 0, index_k at dI_, q at 2 dI_, k at 2 dI_ + D_
  int D_ = 0;
};

}  // namespace qsa::bench
