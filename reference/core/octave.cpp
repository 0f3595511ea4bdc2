#include "reference/core/octave.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>

#include "reference/core/errors.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"

namespace qsa {

namespace {

constexpr int kKBlockDims = 64;
constexpr int kScaleBytes = 2;  // fp16

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

int round_up(int n, int multiple) { return (n + multiple - 1) / multiple * multiple; }

int block_code_bytes(const OctaveBlock& b) { return b.dims * b.bits / 8; }

const char* format_name(OctaveFormat format) {
  switch (format) {
    case OctaveFormat::kK3V4:
      return "octave_k3v4";
    case OctaveFormat::kK3V3:
      return "octave_k3v3";
    case OctaveFormat::kK3V3Compact:
      return "octave_k3v3_compact";
  }
  return "octave_?";
}

// A codebook viewed as integers over a divisor: comparing |u * divisor - entry|
// keeps the nearest-entry decision to a single rounding (of u * divisor), which
// a GPU kernel can reproduce.
struct Codebook {
  const int* entries;
  int size;
  double divisor;
  double value(int index) const { return entries[index] / divisor; }
};

Codebook codebook_for(int bits) {
  if (bits == 3)
    return {kLloydMax3Bit.data(), static_cast<int>(kLloydMax3Bit.size()), kLloydMax3Divisor};
  return {kLloydMax4Bit.data(), static_cast<int>(kLloydMax4Bit.size()), kLloydMax4Divisor};
}

// Strictly-smaller comparison keeps the lower index on an exact tie.
int nearest_index(const Codebook& cb, double u) {
  double t = u * cb.divisor;
  int best = 0;
  double best_dist = std::fabs(t - cb.entries[0]);
  for (int j = 1; j < cb.size; ++j) {
    double d = std::fabs(t - cb.entries[j]);
    if (d < best_dist) {
      best_dist = d;
      best = j;
    }
  }
  return best;
}

// Bit cursor over the slot: code bits go LSB-first, so bit p of the stream is
// bit (p % 8) of byte p / 8.
void put_bits(uint8_t* bytes, int bit_offset, unsigned value, int bits) {
  for (int i = 0; i < bits; ++i) {
    int p = bit_offset + i;
    if ((value >> i) & 1u) bytes[p / 8] = static_cast<uint8_t>(bytes[p / 8] | (1u << (p % 8)));
  }
}

unsigned get_bits(const uint8_t* bytes, int bit_offset, int bits) {
  unsigned value = 0;
  for (int i = 0; i < bits; ++i) {
    int p = bit_offset + i;
    value |= static_cast<unsigned>((bytes[p / 8] >> (p % 8)) & 1u) << i;
  }
  return value;
}

void put_scale(uint8_t* at, double s) {
  uint16_t h = fp16_bits(s);
  at[0] = static_cast<uint8_t>(h & 0xFFu);
  at[1] = static_cast<uint8_t>(h >> 8);
}

double get_scale(const uint8_t* at) {
  return fp16_value(static_cast<uint16_t>(at[0] | (at[1] << 8)));
}

// Encodes one block: codes at `codes` (bit-packed, starting at bit 0), scale
// at `scale`. Both regions must be zeroed by the caller.
void encode_block(const OctaveBlock& b, const double* x, uint8_t* codes, uint8_t* scale) {
  const std::vector<double>& signs = octave_signs(b.dims);
  std::vector<double> y(b.dims);
  for (int i = 0; i < b.dims; ++i) y[i] = signs[i] * x[b.first_dim + i];
  walsh_hadamard(y.data(), b.dims);

  double norm2 = 0.0;
  for (double v : y) norm2 += v * v;
  Codebook cb = codebook_for(b.bits);
  if (norm2 == 0.0) {
    // No direction to keep: a zero scale decodes to zeros whatever the codes;
    // the entry just above 0 (first of the upper half) is the canonical code.
    for (int i = 0; i < b.dims; ++i)
      put_bits(codes, i * b.bits, static_cast<unsigned>(cb.size / 2), b.bits);
    put_scale(scale, 0.0);
    return;
  }
  double inv_rms = 1.0 / std::sqrt(norm2 / b.dims);
  double dot = 0.0;  // y · c, positive: each code shares the sign of its y_i
  for (int i = 0; i < b.dims; ++i) {
    int idx = nearest_index(cb, y[i] * inv_rms);
    dot += y[i] * cb.value(idx);
    put_bits(codes, i * b.bits, static_cast<unsigned>(idx), b.bits);
  }
  // Spec section 8 fixes the scale by x · x' = |x|^2 (the projection of the
  // reconstruction on x is exact), not by least squares: it comes out about
  // 1 / (1 - D) larger than the MSE-optimal (y · c) / |c|^2.
  put_scale(scale, norm2 / dot);
}

void decode_block(const OctaveBlock& b, const uint8_t* codes, const uint8_t* scale, double* x) {
  Codebook cb = codebook_for(b.bits);
  double s = get_scale(scale);
  double* y = x + b.first_dim;
  for (int i = 0; i < b.dims; ++i)
    y[i] = s * cb.value(static_cast<int>(get_bits(codes, i * b.bits, b.bits)));
  walsh_hadamard(y, b.dims);
  const std::vector<double>& signs = octave_signs(b.dims);
  for (int i = 0; i < b.dims; ++i) y[i] *= signs[i];
}

// Runs fn(block, codes_ptr, scale_ptr) over one tensor's blocks laid out as
// [codes of every block][one fp16 scale per block], returning the end offset.
template <class Slot, class Fn>
int for_each_block(const std::vector<OctaveBlock>& blocks, Slot* slot, int offset, Fn fn) {
  int code_bytes = 0;
  for (const OctaveBlock& b : blocks) code_bytes += block_code_bytes(b);
  int code_at = offset;
  int scale_at = offset + code_bytes;
  for (const OctaveBlock& b : blocks) {
    fn(b, slot + code_at, slot + scale_at);
    code_at += block_code_bytes(b);
    scale_at += kScaleBytes;
  }
  return scale_at;
}

}  // namespace

OctaveLayout octave_layout(OctaveFormat format, int head_dim, int rotary_dim) {
  const char* name = format_name(format);
  if (head_dim < kKBlockDims || !is_power_of_two(head_dim)) {
    throw ConfigError(fmt::format(
        "{}: head_dim = {} is not supported: the Walsh-Hadamard transform needs a power of two "
        "that is a multiple of {} (e.g. 128 or 256)",
        name, head_dim, kKBlockDims));
  }
  bool per_block = format != OctaveFormat::kK3V3Compact;
  if (per_block && rotary_dim != kKBlockDims) {
    throw ConfigError(fmt::format(
        "{}: rotary_dim = {} is not supported: K's RoPE block is transformed on its own and "
        "must be exactly {} dims (use octave_k3v3_compact for other rotary dims)",
        name, rotary_dim, kKBlockDims));
  }
  if (rotary_dim < 0 || rotary_dim > head_dim) {
    throw ConfigError(fmt::format("{}: rotary_dim = {} is outside [0, head_dim = {}]", name,
                                  rotary_dim, head_dim));
  }

  OctaveLayout layout;
  if (per_block) {
    for (int first = 0; first < head_dim; first += kKBlockDims) {
      layout.k_blocks.push_back({first, kKBlockDims, first == 0 ? 4 : 3});
    }
  } else {
    layout.k_blocks.push_back({0, head_dim, 3});
  }
  layout.v_blocks.push_back({0, head_dim, format == OctaveFormat::kK3V4 ? 4 : 3});

  int bytes = 0;
  for (const auto* blocks : {&layout.k_blocks, &layout.v_blocks}) {
    for (const OctaveBlock& b : *blocks) bytes += block_code_bytes(b) + kScaleBytes;
  }
  // Padding follows the engines' slot alignment; only the padding differs
  // between their layouts and this one.
  layout.slot_bytes = round_up(bytes, per_block ? 8 : 4);
  return layout;
}

void octave_encode(const OctaveLayout& layout, const double* k, const double* v, uint8_t* slot) {
  std::fill(slot, slot + layout.slot_bytes, uint8_t{0});
  int end = for_each_block(
      layout.k_blocks, slot, 0,
      [&](const OctaveBlock& b, uint8_t* c, uint8_t* s) { encode_block(b, k, c, s); });
  for_each_block(layout.v_blocks, slot, end,
                 [&](const OctaveBlock& b, uint8_t* c, uint8_t* s) { encode_block(b, v, c, s); });
}

void octave_decode(const OctaveLayout& layout, const uint8_t* slot, double* k, double* v) {
  int end = for_each_block(
      layout.k_blocks, slot, 0,
      [&](const OctaveBlock& b, const uint8_t* c, const uint8_t* s) { decode_block(b, c, s, k); });
  for_each_block(
      layout.v_blocks, slot, end,
      [&](const OctaveBlock& b, const uint8_t* c, const uint8_t* s) { decode_block(b, c, s, v); });
}

void walsh_hadamard(double* x, int n) {
  if (!is_power_of_two(n)) {
    throw ConfigError(fmt::format("walsh_hadamard: n = {} is not a power of two", n));
  }
  for (int half = 1; half < n; half *= 2) {
    for (int start = 0; start < n; start += 2 * half) {
      for (int i = start; i < start + half; ++i) {
        double a = x[i];
        double b = x[i + half];
        x[i] = a + b;
        x[i + half] = a - b;
      }
    }
  }
  // One scaling at the end (rather than 1/sqrt(2) per stage) keeps the
  // butterflies exact on small integers and makes the transform self-inverse.
  double norm = 1.0 / std::sqrt(static_cast<double>(n));
  for (int i = 0; i < n; ++i) x[i] *= norm;
}

const std::vector<double>& octave_signs(int n) {
  if (!is_power_of_two(n)) {
    throw ConfigError(fmt::format("octave_signs: n = {} is not a power of two", n));
  }
  // Built once per size and shared; map nodes never move, so the returned
  // reference stays valid while other sizes are added from other threads.
  static std::mutex mutex;
  static std::map<int, std::vector<double>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<double> signs(n);
  uint64_t stream = stream_id("octave-signs-" + std::to_string(n));
  for (int i = 0; i < n; ++i) {
    signs[i] = counter_normal(kOctaveSignSeed, stream, static_cast<uint64_t>(i)) < 0.0 ? -1.0 : 1.0;
  }
  return cache.emplace(n, std::move(signs)).first->second;
}

}  // namespace qsa
