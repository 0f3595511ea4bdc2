#include "reference/kv_cache.hpp"

#include <fmt/format.h>

#include <cmath>

#include "reference/core/config.hpp"
#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/fp8.hpp"

namespace qsa {

namespace {

bool is_octave(KvDtype d) {
  return d == KvDtype::kOctaveK3V4 || d == KvDtype::kOctaveK3V3 || d == KvDtype::kOctaveK3V3Compact;
}

void validate(const KvCacheParams& p) {
  auto positive = [](const char* name, long long v) {
    if (v <= 0) throw ConfigError(fmt::format("main KV cache: {} = {} must be positive", name, v));
  };
  positive("num_pages", p.num_pages);
  positive("page_size", p.page_size);
  positive("kv_heads", p.kv_heads);
  positive("head_dim", p.head_dim);
  if (p.dtype == KvDtype::kFp8) {
    for (auto [name, s] : {std::pair{"k_scale", p.k_scale}, std::pair{"v_scale", p.v_scale}})
      if (!(s > 0) || !std::isfinite(s))
        throw ConfigError(fmt::format("main KV cache: fp8 {} = {} must be positive and finite", name, s));
  }
  if (is_octave(p.dtype) && (p.octave_window < 0 || p.octave_sinks < 0))
    throw ConfigError(fmt::format("main KV cache: octave window = {} and sinks = {} must be >= 0",
                                  p.octave_window, p.octave_sinks));
}

// bf16 codes are little-endian, the byte order every engine's tensors have.
void put_u16(uint8_t* dst, uint16_t bits) {
  dst[0] = static_cast<uint8_t>(bits & 0xff);
  dst[1] = static_cast<uint8_t>(bits >> 8);
}

}  // namespace

MainKvCache::MainKvCache(const KvCacheParams& p) : p_(p) {
  validate(p_);
  const int D = p_.head_dim;
  switch (p_.dtype) {
    case KvDtype::kBf16: code_bytes_ = 4 * D; break;
    case KvDtype::kFp8: code_bytes_ = 2 * D; break;
    default:
      octave_ = octave_layout(octave_format(p_.dtype), D, p_.rotary_dim);
      code_bytes_ = octave_.slot_bytes;
      break;
  }
  const size_t slots = static_cast<size_t>(num_slots());
  const size_t values = slots * static_cast<size_t>(p_.kv_heads) * static_cast<size_t>(D);
  k_.assign(values, 0.0);
  v_.assign(values, 0.0);
  if (is_octave(p_.dtype)) {
    k_shadow_.assign(values, 0.0);
    v_shadow_.assign(values, 0.0);
  }
  codes_.assign(slots * static_cast<size_t>(p_.kv_heads) * static_cast<size_t>(code_bytes_), 0);
  tag_.assign(slots, -1);
}

const double* MainKvCache::k_exact(int64_t slot, int g) const {
  return k_shadow_.empty() ? k(slot, g) : &k_shadow_[index(slot, g)];
}

const double* MainKvCache::v_exact(int64_t slot, int g) const {
  return v_shadow_.empty() ? v(slot, g) : &v_shadow_[index(slot, g)];
}

void MainKvCache::write(int64_t slot, int64_t position, const double* k, const double* v) {
  if (slot < 0 || slot >= num_slots())
    throw InputError(fmt::format("main KV slot {} is out of range (cache has {} slots: {} pages of {})",
                                 slot, num_slots(), p_.num_pages, p_.page_size));
  if (position < 0)
    throw InputError(fmt::format("main KV write to slot {} has negative position {}", slot, position));
  tag_[slot] = position;
  const int D = p_.head_dim;
  for (int g = 0; g < p_.kv_heads; ++g) {
    const double* kin = k + static_cast<size_t>(g) * D;
    const double* vin = v + static_cast<size_t>(g) * D;
    double* kout = &k_[index(slot, g)];
    double* vout = &v_[index(slot, g)];
    uint8_t* code = &codes_[(static_cast<size_t>(slot) * p_.kv_heads + g) * code_bytes_];
    switch (p_.dtype) {
      case KvDtype::kBf16:
        for (int d = 0; d < D; ++d) {
          kout[d] = p_.round_storage ? round_bf16(kin[d]) : kin[d];
          vout[d] = p_.round_storage ? round_bf16(vin[d]) : vin[d];
          put_u16(code + 2 * d, bf16_bits(kout[d]));
          put_u16(code + 2 * (D + d), bf16_bits(vout[d]));
        }
        break;
      case KvDtype::kFp8:
        for (int d = 0; d < D; ++d) {
          code[d] = fp8_encode(kin[d] / p_.k_scale, p_.fp8_flavor);
          code[D + d] = fp8_encode(vin[d] / p_.v_scale, p_.fp8_flavor);
          kout[d] = fp8_decode(code[d], p_.fp8_flavor) * p_.k_scale;
          vout[d] = fp8_decode(code[D + d], p_.fp8_flavor) * p_.v_scale;
        }
        break;
      default: {
        // Engines encode the bf16 activation, and their exact window/sink
        // tables hold that same bf16 value.
        double* ks = &k_shadow_[index(slot, g)];
        double* vs = &v_shadow_[index(slot, g)];
        for (int d = 0; d < D; ++d) {
          ks[d] = p_.round_storage ? round_bf16(kin[d]) : kin[d];
          vs[d] = p_.round_storage ? round_bf16(vin[d]) : vin[d];
        }
        octave_encode(octave_, ks, vs, code);
        octave_decode(octave_, code, kout, vout);
        break;
      }
    }
  }
}

}  // namespace qsa
