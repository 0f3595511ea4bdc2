// Device-side building blocks of the prepare kernel (prepare.hip): the
// kernel's arguments and the pieces "load, Gemma RMSNorm, RoPE, store" that
// one lane group runs on one head row. Include only from .hip files.
#pragma once

#include <cstdint>

#include "gpu/common/bf16.hpp"
#include "gpu/common/wave.hpp"
#include "gpu/prepare/prepare_codes.hpp"
#include "gpu/prepare/prepare_params.hpp"

// The kernel reads its arguments in place, with indices known only at run
// time (a lane's inverse frequency, the RoPE of a task). CUDA copies a by-value
// argument to local memory for that unless it is __grid_constant__; HIP has
// no such attribute (hipcc 5.2 copies them to scratch, as it did for the
// previous kernel: AMD performance is not measured here).
#if defined(QSA_GPU_CUDA)
#define QSA_PREPARE_ARGS const __grid_constant__
#else
#define QSA_PREPARE_ARGS const
#endif

namespace qsa::gpu::prep {

using prepare_detail::Fp8Kind;

// A task (one head row) runs on a group of kGroup lanes: an aligned slice of
// one wave (every supported wave is a whole number of kMinWaveSize lanes), so
// the xor shuffles of group_sum (offsets < kGroup) never leave the group.
// Groups are independent: a block is only a bundle of kGroups of them.
constexpr int kThreads = 128;
constexpr int kGroup = kMinWaveSize;
constexpr int kGroups = kThreads / kGroup;
constexpr int kMaxPairs = kPrepareMaxRopePairs;
constexpr int kMaxDim = kPrepareMaxHeadDim;
static_assert(kThreads % kGroup == 0 && kMaxPairs % kGroup == 0, "whole groups, whole pair slots");

struct NormArgs {
  int dim;
  float eps;
  bool round;  // bf16 after the gain
};

// inv_freq is computed on the host with the reference's formula (exactly
// its bits) and read from a device table (prepare.hip, device_inv_freq).
struct RopeArgs {
  int rotary_dim;
  // Bit j set: frequency pair j rotates at the h (axis_h) or w (axis_w)
  // row of the interleaved mRoPE, else at t: mrope_axis_of for every pair,
  // evaluated on the host, so a task reads its pairs' axes with a shift in
  // place of a modulo by 3 and two compares ahead of its first load.
  uint64_t axis_h, axis_w;
  bool neox;
  bool exact_angle;  // fp64 angle; else f32(f32(pos) * inv_freq)
  int cos_sin;       // 0 fp64, 1 fp32, 2 bf16 (after fp32)
  bool per_op;       // hf-eager: round(round(x cos) + round(rot sin))
  bool round_output;
  const double* inv_freq;  // [kMaxPairs] in device memory, zero past rotary_dim / 2
};

struct KernelArgs {
  int64_t num_tokens;  // T
  int num_reqs;        // R
  int hi, di, h, g, d; // H_I, d_I, H, G, D
  int row_tasks;       // H_I + H + G + 1: a row's heads and its pooling slot
  int ratio, ring_capacity;
  int64_t ring_slots, comp_rows, kv_slots;
  NormArgs norm_iq, norm_ik, norm_q, norm_k;
  RopeArgs rope_i, rope_m;
  bool round_pool;  // bf16 pooled means
  bool vec2;        // every row start 4-byte aligned for bf16 pair stores: the launcher checks
  bool index_fp8;
  Fp8Kind index_kind;
  bool kv_fp8;
  Fp8Kind kv_kind;
  double k_scale, v_scale;
  const float* index_qk;
  const float* qg;
  const float* k;
  const float* v;
  const float* w_iq;
  const float* w_ik;
  const float* w_q;
  const float* w_k;
  const int32_t* token_to_req;
  const int64_t* pos;
  const int64_t* rope_pos;
  const int64_t* main_slot;
  const int64_t* ring_slot;
  const int64_t* compressed_slot;
  const int32_t* starts;
  const int32_t* ring_blocks;
  float* ring_keys;
  int64_t* ring_rope;
  void* compressed;
  void* k_cache;
  void* v_cache;
  void* index_q;
  uint16_t* q;
  uint16_t* k_out;
  uint16_t* gate;
};

__device__ inline int group_lane() { return static_cast<int>(threadIdx.x % kGroup); }
__device__ inline int group_id() { return static_cast<int>(threadIdx.x / kGroup); }

// Butterfly sum over the lane group; with kGroup == warpSize (NVIDIA) the
// order is wave_sum's.
__device__ inline float group_sum(float v) {
  for (int offset = kGroup / 2; offset > 0; offset /= 2) v += wave_shfl_xor(v, offset);
  return v;
}

// float -> bf16 bits exactly as float_to_bf16_bits (gpu/common/bf16.hpp);
// on NVIDIA (sm_80+) by the hardware conversion, one instruction instead of
// a dozen, with the codec's quiet NaN (sign | 0x7fc0) in place of the
// hardware's canonical one.
__device__ inline uint16_t bf16_code(float v) {
#if defined(QSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(v));
  return v != v ? static_cast<uint16_t>(((float_bits(v) >> 16) & 0x8000u) | 0x7fc0u) : b;
#else
  return float_to_bf16_bits(v);
#endif
}
// fp64 -> bf16 bits with one rounding, as prepare_detail::bf16_bits_from_double
// (round to odd to fp32, then to bf16).
__device__ inline uint16_t bf16_code(double v) { return bf16_code(prepare_detail::float_round_odd(v)); }
__device__ inline float bf16_round(float v) { return bf16_to_float(bf16_code(v)); }
__device__ inline double bf16_round(double v) { return bf16_to_float(bf16_code(v)); }

// bf16_code(lo) | bf16_code(hi) << 16, on NVIDIA by one paired conversion.
__device__ inline uint32_t bf16_pair_code(float lo, float hi) {
#if defined(QSA_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t b;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(b) : "f"(hi), "f"(lo));
  if (lo == lo && hi == hi) return b;
#endif
  return bf16_code(lo) | static_cast<uint32_t>(bf16_code(hi)) << 16;
}

// a * b + c * d with both products rounded, as the reference's fp64 host
// code computes it: an fma would skip one rounding.
__device__ inline double sum_of_products(double a, double b, double c, double d) {
#if defined(QSA_GPU_CUDA)
  return __dadd_rn(__dmul_rn(a, b), __dmul_rn(c, d));  // never contracted
#else
#pragma clang fp contract(off)
  return a * b + c * d;
#endif
}

// ---- a head row in a lane group --------------------------------------------
//
// Lane l holds, of a head row of `dim` values with R rotary dims, P pair
// slots and T tail slots:
//  - frequency pairs j = l + kGroup·p (p < P, j < R/2), both members: slot p
//    holds x[first(j)], slot P + p holds x[second(j)] (NeoX j and j + R/2,
//    GPT-J 2j and 2j + 1), so the lane rotates its pairs alone, with the
//    cos/sin it computes itself: no shared table, no barrier;
//  - tail elements, which RoPE leaves unchanged, two adjacent ones per
//    pair of slots: slots 2P + 2c and 2P + 2c + 1 hold x[i] and x[i + 1],
//    i = R + 2l + 2·kGroup·c (c < T/2, i < dim), stored as one bf16 pair
//    where the launcher found every row aligned (KernelArgs::vec2), else
//    element by element.
// Every element of the row sits in exactly one slot of one lane; absent
// slots hold 0 and are never stored. The kernel is compiled for the shapes
// the launcher picks from the params: registers are allocated for the worst
// path, so T = 16 for every launch would cost the model's dims (T = 6) half
// of the resident warps.
//
// kExact: every row of the shape fills its slots (R = 2·P·kGroup, dim = R +
// T·kGroup) and every row start is aligned for float2 loads and bf16 pair
// stores (the launcher checks both). Then the dims are constants and no
// slot needs a bounds check, a clamp or a choice between store widths: the
// model's heads (Q and K: P = 1, T = 6; indexer: P = 1, T = 2) run so, and
// the checks were a fifth of a head task's instructions.
template <int P, int T, bool kExact>
struct Shape {
  static_assert(T % 2 == 0, "tail slots come in adjacent pairs");
  static constexpr int kPairs = P;
  static constexpr int kTail = T;
  static constexpr int kSlots = 2 * P + T;
  static constexpr bool kFull = kExact;
};

template <class S>
struct Row {
  float v[S::kSlots];
};

// The rotary dims and the row length: constants for an exact shape.
template <class S>
__device__ inline int rotary_of(const RopeArgs& r) {
  return S::kFull ? 2 * S::kPairs * kGroup : r.rotary_dim;
}
template <class S>
__device__ inline int dim_of(int dim) {
  return S::kFull ? (2 * S::kPairs + S::kTail) * kGroup : dim;
}

// The element that slot s of this lane holds, or -1.
template <class S>
__device__ inline int slot_element(const RopeArgs& r, int dim, int s) {
  constexpr int P = S::kPairs;
  const int lane = group_lane(), rotary = rotary_of<S>(r), half = rotary / 2;
  if (s < 2 * P) {
    const int j = lane + kGroup * (s % P);
    if (!S::kFull && j >= half) return -1;
    const bool first = s < P;
    return r.neox ? (first ? j : j + half) : (first ? 2 * j : 2 * j + 1);
  }
  const int i = rotary + 2 * lane + 2 * kGroup * ((s - 2 * P) / 2) + (s - 2 * P) % 2;
  return S::kFull || i < dim ? i : -1;
}

template <class S>
__device__ inline bool slot_present(const RopeArgs& r, int dim, int s) {
  return S::kFull || slot_element<S>(r, dim, s) >= 0;
}

// x[i], x[i + 1] (0 past dim). Both loads are unconditional, from indices
// clamped into the row, and zeroed afterwards: for a load under a branch
// (even a uniform one, such as a choice between one 8-byte load and two
// 4-byte ones) the compiler waits where the branch joins, and ncu showed the
// row's loads then running one after another, the kernel's top stall. An
// exact shape loads the aligned pair as one float2.
template <class S>
__device__ inline void load_two(const float* src, int i, int dim, float& x0, float& x1) {
  if constexpr (S::kFull) {
    const float2 v = *reinterpret_cast<const float2*>(src + i);
    x0 = v.x;
    x1 = v.y;
  } else {
    const float v0 = src[i < dim ? i : dim - 1];
    const float v1 = src[i + 1 < dim ? i + 1 : dim - 1];
    x0 = i < dim ? v0 : 0.0f;
    x1 = i + 1 < dim ? v1 : 0.0f;
  }
}

// The lane's slots of src[0, dim): every load is issued before any is used
// (none under a branch: load_two), so a head row costs one memory latency,
// not one per element.
template <class S>
__device__ void load_row(const float* src, int dim, const RopeArgs& r, Row<S>& x) {
  constexpr int P = S::kPairs;
#pragma unroll
  for (int s = 0; s < 2 * P; ++s) {
    const int i = slot_element<S>(r, dim, s);
    const bool in = S::kFull || i >= 0;
    const float v = src[in ? i : 0];
    x.v[s] = in ? v : 0.0f;
  }
#pragma unroll
  for (int s = 2 * P; s < S::kSlots; s += 2) {
    const int i = rotary_of<S>(r) + 2 * group_lane() + 2 * kGroup * ((s - 2 * P) / 2);
    load_two<S>(src, i, dim_of<S>(dim), x.v[s], x.v[s + 1]);
  }
}

// The means of r member rows (member(m) points at row m), summed in fp64 in
// member order as the reference pools, then bf16 with round_pool. One
// member's loads are in flight at a time: few registers for a task that
// only every r-th row of a prefill has.
template <class S, class Member>
__device__ void pooled_row(int dim, const RopeArgs& rope, int r, bool round_pool, Member member, Row<S>& x) {
  double sum[S::kSlots];
#pragma unroll
  for (int s = 0; s < S::kSlots; ++s) sum[s] = 0.0;
#pragma unroll 1
  for (int m = 0; m < r; ++m) {
    Row<S> v;
    load_row(member(m), dim, rope, v);
#pragma unroll
    for (int s = 0; s < S::kSlots; ++s) sum[s] += static_cast<double>(v.v[s]);
  }
#pragma unroll
  for (int s = 0; s < S::kSlots; ++s) {
    const double mean = sum[s] / r;
    x.v[s] = static_cast<float>(round_pool ? bf16_round(mean) : mean);
  }
}

// Gemma RMSNorm of the group's row x in place, weights w, in fp32 as engines
// do: the sum of squares over the lane's slots, the butterfly, rsqrtf,
// x * rsqrt * (1 + w), optional bf16. (Any summation order is inside the fp32
// bound of tests/tolerances.hpp.) One rsqrtf per lane, not a division per
// slot: an IEEE division is a reciprocal, three fmas and a branch to its
// slow path, and the branches kept a task's eight divisions from
// overlapping; they were 15% of a main head task's instructions
// (docs/performance.md, eighteenth pass). rsqrtf is what the engines' fp32
// norm calls (torch.rsqrt); its <= 2 ulps (CUDA's documented bound) are in
// the bound.
template <class S>
__device__ void norm_row(int dim, const NormArgs& n, const RopeArgs& r, const Row<S>& w, Row<S>& x) {
  float sq = 0.0f;
#pragma unroll
  for (int s = 0; s < S::kSlots; ++s) sq += x.v[s] * x.v[s];  // absent slots add 0
  const float inv_rms = rsqrtf(group_sum(sq) / static_cast<float>(dim_of<S>(dim)) + n.eps);
#pragma unroll
  for (int s = 0; s < S::kSlots; ++s) {
    if (slot_present<S>(r, dim, s)) x.v[s] = x.v[s] * inv_rms * (1.0f + w.v[s]);  // skips absent slots
  }
  if (!n.round) return;
#pragma unroll
  for (int s = 0; s < S::kSlots; s += 2) {  // two at a time: one paired conversion
    const uint32_t pair = bf16_pair_code(x.v[s], x.v[s + 1]);
    x.v[s] = bits_float(pair << 16);
    x.v[s + 1] = bits_float(pair & 0xffff0000u);
  }
}

// The position row (0 = t, 1 = h, 2 = w) of frequency pair lane + kGroup·p
// (< kMaxPairs): p (a constant in the unrolled loops) picks a 32-bit word
// of the masks, the lane a bit of it.
__device__ inline int pair_axis(const RopeArgs& r, int p, int lane) {
  const auto bit = [&](uint64_t mask) { return (static_cast<uint32_t>(mask >> (kGroup * p)) >> lane) & 1u; };
  return bit(r.axis_h) ? 1 : static_cast<int>(bit(r.axis_w)) * 2;
}

// The RoPE positions of the lane's pairs, read while the head row's loads
// are in flight: pair j rotates at row `axis` (0 = t, 1 = h, 2 = w) of the
// interleaved mRoPE, position(axis) reads it. One read per pair slot, of
// the one axis the pair needs (absent pairs read one they never use), in
// place of all three per task.
template <class S, class Position>
__device__ void lane_positions(const RopeArgs& r, Position position, int64_t (&pos)[S::kPairs]) {
#pragma unroll
  for (int p = 0; p < S::kPairs; ++p) {
    pos[p] = position(pair_axis(r, p, group_lane()));  // any pair: an axis in 0..2
  }
}

// cos and sin of frequency pair j at `position`, as the reference's
// rope_cos_sin: the angle in fp64 or as torch forms it in fp32, cos/sin in
// fp64, then optionally rounded to fp32 and on to bf16 (a cos/sin cache).
// sincos shares one argument reduction between the two; with nvcc 13 its
// polynomials and their order are those of cos() and sin(), so the values
// are the same bits.
__device__ inline void pair_cos_sin(const RopeArgs& r, double inv_freq, int64_t position, double& c, double& s) {
  double angle;
  if (r.exact_angle) {
    angle = static_cast<double>(position) * inv_freq;
  } else {
    angle = static_cast<double>(static_cast<float>(position) * static_cast<float>(inv_freq));
  }
  sincos(angle, &s, &c);
  if (r.cos_sin == 0) return;
  const float cf = static_cast<float>(c), sf = static_cast<float>(s);
  c = static_cast<double>(r.cos_sin == 2 ? bf16_round(cf) : cf);
  s = static_cast<double>(r.cos_sin == 2 ? bf16_round(sf) : sf);
}

// The inverse frequencies of the lane's pairs, loaded next to their
// positions (lane_positions), before either is used: the table has
// kMaxPairs entries, so every lane's load is in bounds and needs no test.
template <class S>
__device__ void lane_inv_freq(const RopeArgs& r, double (&inv)[S::kPairs]) {
  static_assert(S::kPairs * kGroup <= kMaxPairs, "pair slots inside the table");
#pragma unroll
  for (int p = 0; p < S::kPairs; ++p) inv[p] = r.inv_freq[group_lane() + kGroup * p];
}

// The cos/sin of the lane's pairs (0 for absent ones).
template <class S>
__device__ void lane_cos_sin(const RopeArgs& r, const int64_t (&pos)[S::kPairs], const double (&inv)[S::kPairs],
                             double (&c)[S::kPairs], double (&s)[S::kPairs]) {
#pragma unroll
  for (int p = 0; p < S::kPairs; ++p) {
    const int j = group_lane() + kGroup * p;
    c[p] = s[p] = 0.0;
    if (S::kFull || j < rotary_of<S>(r) / 2) pair_cos_sin(r, inv[p], pos[p], c[p], s[p]);
  }
}

// A rotated value as the stores need it: v for an fp8 store, and its bf16
// code for a bf16 store. Where the knobs round to bf16, the code is the
// rounding's own, so a bf16 store does not round v a second time: that
// re-encoding (two fp64 conversions, two compares and a branch per value)
// was half of the chain after the rotation. Same bits: v is then a bf16
// value, exact in fp32, so bf16_code(v) is the code v came from; a NaN
// gets 0x7fc0 either way on NVIDIA (its fp64 -> fp32 conversion returns the
// canonical NaN whatever the sign, prepare_test.cpp's device encoders), and
// keeps its sign either way where conversions keep NaN signs.
struct Rotated {
  double v;
  uint16_t bf16;  // bf16_code(v)
};

__device__ inline Rotated bf16_rounded(uint16_t code) { return {bf16_to_float(code), code}; }

// One rotated value: `rot` is -x[second] for the first member of a pair and
// +x[first] for the second (rotate_half), in fp64 like the reference.
__device__ inline Rotated rotate_one(const RopeArgs& r, double x, double rot, double c, double s) {
  if (r.per_op) return bf16_rounded(bf16_code(bf16_round(x * c) + bf16_round(rot * s)));
  const double v = sum_of_products(x, c, rot, s);
  const uint16_t code = bf16_code(v);
  return r.round_output ? bf16_rounded(code) : Rotated{v, code};
}

// Stores x[i] (i < dim) and x[i + 1] (if below dim): store2 at once with
// vec2 (always for an exact shape), else store each.
template <class S, class Store, class Store2>
__device__ void store_two(int i, int dim, bool vec2, float x0, float x1, Store store, Store2 store2) {
  if (S::kFull || vec2) {
    store2(i, x0, x1);
  } else {
    store(i, x0);
    if (i + 1 < dim) store(i + 1, x1);
  }
}

// RoPE of the normed row y, then its stores: store(i, v) of each rotated
// value (a Rotated: fp64, rounded to bf16 where the knobs round), store2(i, v0, v1)
// of each pair of adjacent tail values with vec2, else store(i, v) of each,
// as the floats they are (exact, so a store rounds them as it would their
// fp64 value, without the fp64 steps).
template <class S, class Store, class Store2>
__device__ void rope_store_row(int dim, const RopeArgs& r, bool vec2, const double (&c)[S::kPairs],
                               const double (&s)[S::kPairs], const Row<S>& y, Store store, Store2 store2) {
  constexpr int P = S::kPairs;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    if (!slot_present<S>(r, dim, p)) continue;
    const int first = slot_element<S>(r, dim, p), second = slot_element<S>(r, dim, P + p);
    const double a = y.v[p], b = y.v[P + p];
    store(first, rotate_one(r, a, -b, c[p], s[p]));
    store(second, rotate_one(r, b, a, c[p], s[p]));
  }
#pragma unroll
  for (int t = 2 * P; t < S::kSlots; t += 2) {
    const int i = slot_element<S>(r, dim, t);
    if (S::kFull || i >= 0) store_two<S>(i, dim_of<S>(dim), vec2, y.v[t], y.v[t + 1], store, store2);
  }
}

// ---- stores -------------------------------------------------------------------

// Where a task's row goes: row element i to base[i], as bf16 bits
// (uint16_t) or as fp8 codes (uint8_t) of v / scale (scale 1 for the
// indexer dtype: v / 1 is v); zeros for padding rows (the all-zero code of
// bf16 and of every fp8 flavour); nothing when off.
struct Dest {
  void* base = nullptr;
  bool on = false;
  bool zero = false;
  bool fp8 = false;
  Fp8Kind kind = Fp8Kind::kE4m3fn;
  double scale = 1.0;
};

__device__ inline Dest bf16_dest(uint16_t* base, bool on, bool zero) { return Dest{base, on, zero}; }

__device__ inline Dest code_dest(void* base, int64_t offset, bool on, bool zero, bool fp8, Fp8Kind kind,
                                 double scale) {
  void* at = fp8 ? static_cast<void*>(static_cast<uint8_t*>(base) + offset)
                 : static_cast<void*>(static_cast<uint16_t*>(base) + offset);
  return Dest{at, on, zero, fp8, kind, scale};
}

// kFp8: whether the kernel was built with fp8 stores at all (the launcher
// picks it from the params); bf16-only kernels carry no fp8 code, whose
// registers would otherwise count for every path.
template <bool kFp8, class V>
__device__ void put(const Dest& d, int i, V v) {
  if (!d.on) return;
  if (kFp8 && d.fp8) {
    double x = static_cast<double>(v);
    if (d.scale != 1.0) x /= d.scale;  // the KV cache's fp8(x / scale); skipped where it changes nothing
    static_cast<uint8_t*>(d.base)[i] = d.zero ? uint8_t{0} : prepare_detail::fp8_encode_double(x, d.kind);
  } else {
    static_cast<uint16_t*>(d.base)[i] = d.zero ? uint16_t{0} : bf16_code(v);
  }
}

// A rotated value: fp8 codes encode v, bf16 stores take the code computed
// with it (Rotated).
template <bool kFp8>
__device__ void put(const Dest& d, int i, const Rotated& x) {
  if (kFp8 && d.fp8) {
    put<kFp8>(d, i, x.v);
  } else if (d.on) {
    static_cast<uint16_t*>(d.base)[i] = d.zero ? uint16_t{0} : x.bf16;
  }
}

// Elements i and i + 1 (i even, both in the row): a bf16 pair is one
// 4-byte store (vec2 alignment).
template <bool kFp8>
__device__ void put2(const Dest& d, int i, float v0, float v1) {
  if (!d.on) return;
  if (kFp8 && d.fp8) {
    put<kFp8>(d, i, v0);
    put<kFp8>(d, i + 1, v1);
  } else {
    // Little-endian: element i in the low half.
    *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(d.base) + i) = d.zero ? 0u : bf16_pair_code(v0, v1);
  }
}

}  // namespace qsa::gpu::prep
