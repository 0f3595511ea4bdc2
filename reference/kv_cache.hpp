// The paged main KV cache (spec sections 7 and 8) in every KV dtype.
//
// A slot holds one token's K and V for all G KV heads. write() encodes:
//   bf16: values rounded to bf16 when the storage-point knob is on (exact
//         otherwise: the `exact` profile stores fp64, the "exact KV" baseline);
//   fp8:  code = fp8(x / scale), read back as code · scale;
//   Octave: packed slots (reference/core/octave.hpp); reads decode them.
// Octave also keeps an exact shadow copy of every slot, modelling ideal
// (collision-free) window and sink tables; attention picks the shadow for
// tokens in the window or the sinks.
//
// Each slot records the request-relative position written there, so a read
// the trace cannot justify (a slot never written, or overwritten by another
// token) is detected instead of returning stale numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/core/octave.hpp"
#include "reference/core/stage_params.hpp"

namespace qsa {

class MainKvCache {
 public:
  explicit MainKvCache(const KvCacheParams& p);

  const KvCacheParams& params() const { return p_; }
  int64_t num_slots() const { return p_.num_pages * p_.page_size; }

  // k, v: [G, D] of one token at request-relative `position`.
  void write(int64_t slot, int64_t position, const double* k, const double* v);

  // Values attention reads for KV head g: [D] each.
  const double* k(int64_t slot, int g) const { return &k_[index(slot, g)]; }
  const double* v(int64_t slot, int g) const { return &v_[index(slot, g)]; }
  // Octave's exact shadow copies ([D]); equal to k()/v() for other dtypes.
  const double* k_exact(int64_t slot, int g) const;
  const double* v_exact(int64_t slot, int g) const;

  // Position tag of a slot, -1 when it was never written.
  int64_t position_at(int64_t slot) const { return tag_[slot]; }

  // Stored bytes of one (slot, head): bf16 K then V (4·D bytes), fp8 K then
  // V (2·D bytes), or one Octave slot. For traces and kernel comparisons.
  int code_bytes() const { return code_bytes_; }
  const uint8_t* codes(int64_t slot, int g) const { return &codes_[(slot * p_.kv_heads + g) * code_bytes_]; }

 private:
  size_t index(int64_t slot, int g) const { return (static_cast<size_t>(slot) * p_.kv_heads + g) * p_.head_dim; }

  KvCacheParams p_;
  OctaveLayout octave_;
  int code_bytes_ = 0;
  std::vector<double> k_, v_;              // decoded, [slots, G, D]
  std::vector<double> k_shadow_, v_shadow_;  // Octave only
  std::vector<uint8_t> codes_;             // [slots, G, code_bytes]
  std::vector<int64_t> tag_;               // [slots]
};

}  // namespace qsa
