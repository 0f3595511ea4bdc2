// Step sequences for the reference's step-level tests. tests/reference links
// only qsa_reference, so this is a small stand-in for harness/StepBuilder:
// request i owns pages [i·n, (i+1)·n) (its ring block is its first page) and a
// count of cached tokens, so chunked prefill, decode, mixed batches, padding
// and MTP draft steps line up as an engine lays them out.
//
// Hidden states are a pure function of (seed, request, position), so the same
// token gets the same input however a test chunks or batches it; padding rows
// get their own non-zero garbage, which the driver must ignore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/core/config.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/core/step_layout.hpp"
#include "reference/core/tensor.hpp"

namespace qsa::test {

struct Chunk {
  int req;
  int32_t tokens;
};

struct BuiltStep {
  StepMetadata meta;
  TensorD hidden;  // [T, hidden_size]
};

class LocalSteps {
 public:
  // mrope: positions as [3, T] with h and w rows that differ from t, so that
  // a test sees whether the exact (t, h, w) triple travels through the ring.
  LocalSteps(const QsaConfig& c, int num_reqs, int32_t pages_per_req, uint64_t seed, bool mrope = false)
      : config_(c), pages_per_req_(pages_per_req), seed_(seed), mrope_(mrope),
        cached_(static_cast<size_t>(num_reqs), 0) {}

  CacheGeometry geometry() const {
    const int64_t pages = static_cast<int64_t>(cached_.size()) * pages_per_req_;
    return {pages, pages};
  }
  int64_t cached(int req) const { return cached_.at(static_cast<size_t>(req)); }
  uint64_t seed() const { return seed_; }

  // The (t, h, w) RoPE position this helper gives token p of request req.
  static int64_t rope_axis(int axis, int req, int64_t p) {
    if (axis == 0) return p;
    return axis == 1 ? p / 3 + req : 2 * p + 1;
  }

  // The next step: chunks in batch order, then `padding` inert rows.
  BuiltStep next(const std::vector<Chunk>& chunks, int64_t padding = 0, bool mtp_reuse = false) {
    BuiltStep s;
    StepMetadata& m = s.meta;
    const int R = static_cast<int>(chunks.size());
    m.query_start_loc.push_back(0);
    m.block_table = TensorI32({R, pages_per_req_}, -1);
    std::vector<int> owner;       // request of each real row
    std::vector<int64_t> where;   // its position
    for (int i = 0; i < R; ++i) {
      const Chunk& ch = chunks[static_cast<size_t>(i)];
      const int64_t start = cached(ch.req);
      m.query_start_loc.push_back(m.query_start_loc.back() + ch.tokens);
      m.seq_lens.push_back(static_cast<int32_t>(start + ch.tokens));
      for (int32_t j = 0; j < pages_per_req_; ++j) m.block_table.at(i, j) = ch.req * pages_per_req_ + j;
      for (int32_t o = 0; o < ch.tokens; ++o) {
        owner.push_back(ch.req);
        where.push_back(start + o);
      }
      cached_[static_cast<size_t>(ch.req)] = start + ch.tokens;
    }
    const int64_t valid = static_cast<int64_t>(owner.size());
    const int64_t T = valid + padding;
    m.positions = mrope_ ? TensorI64({3, T}, -1) : TensorI64({T}, -1);
    for (int64_t t = 0; t < valid; ++t) {
      const auto u = static_cast<size_t>(t);
      if (mrope_) {
        for (int a = 0; a < 3; ++a) m.positions.at(a, t) = rope_axis(a, owner[u], where[u]);
      } else {
        m.positions.at(t) = where[u];
      }
    }
    m.mtp_reuse = mtp_reuse;

    const int64_t hid = config_.hidden_size;
    s.hidden = TensorD({T, hid});
    const CounterRng garbage(seed_, "hidden.padding");
    for (int64_t t = 0; t < T; ++t) {
      const bool real = t < valid;
      const CounterRng rng =
          real ? CounterRng(seed_, "hidden.req" + std::to_string(owner[static_cast<size_t>(t)])) : garbage;
      const int64_t base = real ? where[static_cast<size_t>(t)] * hid : (step_ * 1000 + t) * hid;
      for (int64_t j = 0; j < hid; ++j)
        s.hidden.at(t, j) = round_bf16(rng.normal(static_cast<uint64_t>(base + j)));
    }
    ++step_;
    return s;
  }

 private:
  QsaConfig config_;
  int32_t pages_per_req_;
  uint64_t seed_;
  bool mrope_;
  std::vector<int64_t> cached_;
  int64_t step_ = 0;
};

}  // namespace qsa::test
