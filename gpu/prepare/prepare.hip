// The fused prepare kernel (prepare.hpp says what it computes).
//
// Grid: one block per request (blocks [0, R)), then one block per row
// (blocks [R, R + T)), kThreads threads each.
//
// A row block zeroes a padding row's outputs, or for a real row: builds the
// row's cos/sin tables (indexer and main RoPE) in shared memory, copies the
// gate and V (and writes V to the KV cache), then hands one head per wave:
// H_I indexer Q heads, H main Q heads, G K heads (which also go to the KV
// cache) and, when the row completes a group whose members all lie in this
// step, that group's pooling.
//
// A request block pools the one group of its request that can straddle the
// step's start (first members in earlier steps, read from the ring), then,
// after a barrier, writes the request's last C raw keys and their RoPE
// positions to the ring.
//
// Race freedom (every inter-block hazard of the launch):
//  - The ring is read only by request blocks, each only in its own ring
//    block b_i = ring_blocks[i] (slots b_i·C + q mod C), and only while
//    pooling its straddling group. It is written only by request blocks:
//    block i writes ring_slot[t] for its own rows, which validate_prepare
//    pins to b_i·C + p mod C, inside b_i. ring_blocks are distinct per
//    request (validated), so no block writes a slot another block reads or
//    writes. Inside block i, every read of the pooling happens before the
//    __syncthreads() that precedes the block's ring writes (a barrier also
//    orders global memory within the block), so the pooling sees the ring as
//    it stood before the step even when a long chunk wraps around the ring
//    onto the straddling group's members. Row blocks never touch the ring.
//  - Only the first group of a request in a step can straddle: a group with
//    first position b·r < ctx = the step's first position and last position
//    >= ctx is the group containing ctx, b = ctx div r. Its completing row
//    block sees first < ctx and skips it; every other completed group has
//    all members in [ctx, ctx + len) and is pooled by its completing row
//    block from index_qk (read-only). So each compressed row is written by
//    exactly one block, and compressed_slot values are distinct (validated).
//  - Main KV slots of real rows are distinct (validated); each row block
//    writes only its own slot and its own output rows.
//  - Nothing in the launch reads the compressed or the KV cache.
#include <cmath>
#include <string>
#include <utility>

#include "gpu/prepare/prepare.hpp"
#include "gpu/prepare/prepare_head.hpp"

namespace qsa::gpu {

namespace {

using namespace prep;
using prepare_detail::bf16_bits_from_double;

static_assert(kThreads >= 2 * kMaxPairs, "one thread per (RoPE table, pair) fills the tables");

struct Shared {
  double inv[2][kMaxPairs];            // inverse frequencies: 0 = indexer RoPE, 1 = main RoPE
  double row_cs[2][2][kMaxPairs];      // [rope][cos | sin][pair] at the row's own position
  double pool_cs[kMaxWaves][2][kMaxPairs];  // per wave: [cos | sin][pair] at a pooled group's position
  float scratch[kMaxWaves][kMaxDim];   // per wave: one head row
};

// The inverse frequencies travel in the kernel arguments; reading them with
// compile-time indices keeps the compiler from copying the argument block to
// local memory.
__device__ void load_inv_freq(const KernelArgs& a, Shared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  const int j = tid % kMaxPairs;
  const int which = tid / kMaxPairs;
  double v = 0.0;
#pragma unroll
  for (int k = 0; k < kMaxPairs; ++k)
    if (k == j) v = which == 0 ? a.rope_i.inv_freq[k] : a.rope_m.inv_freq[k];
  if (which < 2) sh.inv[which][j] = v;
}

// Pools group `first .. first + r - 1` (member q read by member(q)), then
// norms, rotates it at pos3 and stores it in compressed row `slot`. One wave.
template <class Member>
__device__ void pool_group(const KernelArgs& a, Shared& sh, const int64_t pos3[3], int64_t slot, Member member) {
  const int w = wave_id();
  double* cos_t = sh.pool_cs[w][0];
  double* sin_t = sh.pool_cs[w][1];
  fill_cos_sin(a.rope_i, sh.inv[0], pos3, lane_id(), warpSize, cos_t, sin_t);
  wave_barrier();
  const int r = a.ratio;
  auto load = [&](int i) {
    double sum = 0.0;  // fp64 and in member order, as the reference sums
    for (int m = 0; m < r; ++m) sum += static_cast<double>(member(m)[i]);
    const double mean = sum / r;
    return static_cast<float>(a.round_pool ? prepare_detail::round_bf16_double(mean) : mean);
  };
  const bool keep = slot >= 0 && slot < a.comp_rows;
  auto store = [&](int i, double v) {
    if (keep) store_indexer(a, a.compressed, slot * a.di + i, v);
  };
  norm_rope_head(a.di, a.norm_ik, a.w_ik, a.rope_i, cos_t, sin_t, sh.scratch[w], load, store);
}

__device__ void zero_padding_row(const KernelArgs& a, int64_t t) {
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int64_t iq = int64_t{a.hi} * a.di, hd = int64_t{a.h} * a.d, gd = int64_t{a.g} * a.d;
  // Zero is the all-zero code in bf16 and in every fp8 flavour.
  for (int64_t e = tid; e < iq; e += n) {
    if (a.index_fp8) static_cast<uint8_t*>(a.index_q)[t * iq + e] = 0;
    else static_cast<uint16_t*>(a.index_q)[t * iq + e] = 0;
  }
  for (int64_t e = tid; e < hd; e += n) {
    a.q[t * hd + e] = 0;
    a.gate[t * hd + e] = 0;
  }
  for (int64_t e = tid; e < gd; e += n) a.k_out[t * gd + e] = 0;
}

__device__ void row_block(const KernelArgs& a, Shared& sh, int64_t t) {
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int req = a.token_to_req[t];
  if (req < 0 || req >= a.num_reqs) {  // the whole block takes this branch
    zero_padding_row(a, t);
    return;
  }
  const int64_t T = a.num_tokens;
  const int64_t pos3[3] = {a.rope_pos[t], a.rope_pos[T + t], a.rope_pos[2 * T + t]};
  if (tid < kMaxPairs) {
    fill_cos_sin(a.rope_i, sh.inv[0], pos3, tid, kMaxPairs, sh.row_cs[0][0], sh.row_cs[0][1]);
  } else if (tid < 2 * kMaxPairs) {
    fill_cos_sin(a.rope_m, sh.inv[1], pos3, tid - kMaxPairs, kMaxPairs, sh.row_cs[1][0], sh.row_cs[1][1]);
  }

  // Gate and V: copies (the projections are bf16 values already).
  const int64_t hd = int64_t{a.h} * a.d, gd = int64_t{a.g} * a.d;
  for (int64_t e = tid; e < hd; e += n) {
    const int64_t head = e / a.d, dim = e % a.d;
    a.gate[t * hd + e] = bf16_bits_from_double(a.qg[t * 2 * hd + head * 2 * a.d + a.d + dim]);
  }
  const int64_t kv_slot = a.main_slot[t];
  const bool kv_ok = kv_slot >= 0 && kv_slot < a.kv_slots;
  for (int64_t e = tid; e < gd; e += n)
    if (kv_ok) store_kv(a, a.v_cache, kv_slot * gd + e, a.v[t * gd + e], a.v_scale);

  // Pool here only a group whose members all lie in this step.
  const int64_t p = a.pos[t];
  const int64_t cslot = a.compressed_slot[t];
  const int64_t first_row = t - (a.ratio - 1);
  const bool pool = cslot >= 0 && p - (a.ratio - 1) >= a.pos[a.starts[req]];
  __syncthreads();  // row_cs complete

  const int64_t iq_stride = int64_t{a.hi + 1} * a.di;
  const int tasks = a.hi + a.h + a.g + (pool ? 1 : 0);
  for (int task = wave_id(); task < tasks; task += waves_per_block()) {
    float* scratch = sh.scratch[wave_id()];
    if (task < a.hi) {
      const int hh = task;
      const float* x = a.index_qk + t * iq_stride + int64_t{hh} * a.di;
      const int64_t out = (t * a.hi + hh) * a.di;
      norm_rope_head(
          a.di, a.norm_iq, a.w_iq, a.rope_i, sh.row_cs[0][0], sh.row_cs[0][1], scratch, [&](int i) { return x[i]; },
          [&](int i, double v) { store_indexer(a, a.index_q, out + i, v); });
    } else if (task < a.hi + a.h) {
      const int hh = task - a.hi;
      const float* x = a.qg + t * 2 * hd + int64_t{hh} * 2 * a.d;
      uint16_t* out = a.q + t * hd + int64_t{hh} * a.d;
      norm_rope_head(
          a.d, a.norm_q, a.w_q, a.rope_m, sh.row_cs[1][0], sh.row_cs[1][1], scratch, [&](int i) { return x[i]; },
          [&](int i, double v) { out[i] = bf16_bits_from_double(v); });
    } else if (task < a.hi + a.h + a.g) {
      const int gg = task - a.hi - a.h;
      const float* x = a.k + t * gd + int64_t{gg} * a.d;
      const int64_t out = t * gd + int64_t{gg} * a.d;
      const int64_t cache = kv_slot * gd + int64_t{gg} * a.d;
      norm_rope_head(
          a.d, a.norm_k, a.w_k, a.rope_m, sh.row_cs[1][0], sh.row_cs[1][1], scratch, [&](int i) { return x[i]; },
          [&](int i, double v) {
            a.k_out[out + i] = bf16_bits_from_double(v);
            if (kv_ok) store_kv(a, a.k_cache, cache + i, v, a.k_scale);
          });
    } else {
      const int64_t first3[3] = {a.rope_pos[first_row], a.rope_pos[T + first_row], a.rope_pos[2 * T + first_row]};
      const float* raw = a.index_qk + first_row * iq_stride + int64_t{a.hi} * a.di;
      pool_group(a, sh, first3, cslot, [&](int m) { return raw + m * iq_stride; });
    }
  }
}

__device__ void request_block(const KernelArgs& a, Shared& sh, int req) {
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int64_t begin = a.starts[req], end = a.starts[req + 1];
  const int64_t ctx = a.pos[begin];
  const int r = a.ratio, C = a.ring_capacity;
  const int64_t ring_base = int64_t{a.ring_blocks[req]} * C;
  const int64_t iq_stride = int64_t{a.hi + 1} * a.di;
  const int64_t first = ctx / r * r, last = first + r - 1;
  // The straddling group: started before the step, completed inside it.
  if (first != ctx && last < ctx + (end - begin) && wave_id() == 0) {
    const int64_t cslot = a.compressed_slot[begin + (last - ctx)];
    if (cslot >= 0) {
      const int64_t slot0 = ring_base + first % C;  // member 0 is older than the step
      const bool slot0_ok = slot0 >= 0 && slot0 < a.ring_slots;
      int64_t first3[3] = {0, 0, 0};
      for (int ax = 0; ax < 3; ++ax) first3[ax] = slot0_ok ? a.ring_rope[slot0 * 3 + ax] : 0;
      pool_group(a, sh, first3, cslot, [&](int m) -> const float* {
        const int64_t q = first + m;
        if (q >= ctx) return a.index_qk + (begin + q - ctx) * iq_stride + int64_t{a.hi} * a.di;
        const int64_t slot = ring_base + q % C;
        // Out-of-range slots (rejected by validate_prepare) read member 0's row
        // rather than memory outside the ring.
        return a.ring_keys + (slot >= 0 && slot < a.ring_slots ? slot : (slot0_ok ? slot0 : 0)) * a.di;
      });
    }
  }
  __syncthreads();  // every ring read of the pooling happens before the writes below

  const int64_t lo = end - begin > C ? end - C : begin;  // only the last C rows have a ring slot
  const int64_t rows = end - lo;
  for (int64_t e = tid; e < rows * a.di; e += n) {
    const int64_t row = lo + e / a.di, dim = e % a.di;
    const int64_t slot = a.ring_slot[row];
    if (slot >= 0 && slot < a.ring_slots) a.ring_keys[slot * a.di + dim] = a.index_qk[row * iq_stride + int64_t{a.hi} * a.di + dim];
  }
  for (int64_t e = tid; e < rows * 3; e += n) {
    const int64_t row = lo + e / 3, ax = e % 3;
    const int64_t slot = a.ring_slot[row];
    if (slot >= 0 && slot < a.ring_slots) a.ring_rope[slot * 3 + ax] = a.rope_pos[ax * a.num_tokens + row];
  }
}

__global__ void __launch_bounds__(kThreads) prepare_kernel(KernelArgs a) {
  __shared__ Shared sh;
  load_inv_freq(a, sh);
  __syncthreads();
  const int64_t block = blockIdx.x;
  if (block < a.num_reqs) {
    request_block(a, sh, static_cast<int>(block));
  } else {
    row_block(a, sh, block - a.num_reqs);
  }
}

// ---- host side ---------------------------------------------------------------

// rope_inv_freq of the reference, bit for bit (same formula, same libm).
double host_inv_freq(const RopeParams& p, int pair) {
  const double exponent = 2.0 * pair / p.rotary_dim;
  if (p.angle == AngleMode::kExact) return std::pow(p.theta, -exponent);
  const float inv = 1.0f / static_cast<float>(std::pow(p.theta, exponent));
  if (p.angle == AngleMode::kFp32Bf16InvFreq) return static_cast<double>(round_bf16(inv));
  return static_cast<double>(inv);
}

RopeArgs rope_args(const RopeParams& p) {
  RopeArgs r{};
  r.rotary_dim = p.rotary_dim;
  r.lim1 = 3 * p.mrope_section[1];
  r.lim2 = 3 * p.mrope_section[2];
  r.neox = p.style == RopeStyle::kNeox;
  r.exact_angle = p.angle == AngleMode::kExact;
  r.cos_sin = p.cos_sin == CosSinDtype::kExact ? 0 : p.cos_sin == CosSinDtype::kFp32 ? 1 : 2;
  r.per_op = p.per_op_rounding;
  r.round_output = p.round_output;
  for (int j = 0; j < p.rotary_dim / 2; ++j) r.inv_freq[j] = host_inv_freq(p, j);
  return r;
}

NormArgs norm_args(const RmsNormParams& p) { return {p.dim, static_cast<float>(p.eps), p.round_output}; }

Fp8Kind fp8_kind(Fp8Flavor f) {
  switch (f) {
    case Fp8Flavor::kE4m3fnuz: return Fp8Kind::kE4m3fnuz;
    case Fp8Flavor::kE4m3fnEagerNan: return Fp8Kind::kE4m3fnEagerNan;
    default: return Fp8Kind::kE4m3fn;
  }
}

void require(const void* ptr, const char* name) {
  if (ptr == nullptr) throw InputError(std::string("gpu prepare: device pointer ") + name + " is null");
}

void check_launch(const PrepareLayout& l, const PrepareArgs& a) {
  if (l.num_tokens < 0 || l.num_reqs < 0 || l.num_ring_slots < 0 || l.num_compressed_rows < 0 || l.num_kv_slots < 0)
    throw InputError("gpu prepare: the launch layout has a negative size");
  if (l.num_tokens + l.num_reqs > 0x7fffffff)
    throw InputError("gpu prepare: " + std::to_string(l.num_tokens) + " rows and " + std::to_string(l.num_reqs) +
                     " requests exceed one launch (2^31 - 1 blocks)");
  if (l.num_reqs > l.num_tokens)
    throw InputError("gpu prepare: " + std::to_string(l.num_reqs) + " requests but only " +
                     std::to_string(l.num_tokens) + " rows");
  const std::pair<const void*, const char*> always[] = {
      {a.index_qk, "index_qk"}, {a.qg, "qg"}, {a.k, "k"}, {a.v, "v"}, {a.index_q_norm_w, "index_q_norm_w"},
      {a.index_k_norm_w, "index_k_norm_w"}, {a.q_norm_w, "q_norm_w"}, {a.k_norm_w, "k_norm_w"},
      {a.token_to_req, "token_to_req"}, {a.pos, "pos"}, {a.rope_pos, "rope_pos"}, {a.main_slot, "main_slot"},
      {a.ring_slot, "ring_slot"}, {a.compressed_slot, "compressed_slot"}, {a.starts, "starts"},
      {a.ring_keys, "ring_keys"}, {a.ring_rope, "ring_rope"}, {a.compressed, "compressed"}, {a.k_cache, "k_cache"},
      {a.v_cache, "v_cache"}, {a.index_q, "index_q"}, {a.q, "q"}, {a.k_out, "k_out"}, {a.gate, "gate"}};
  for (const auto& [ptr, name] : always) require(ptr, name);
  if (l.num_reqs > 0) require(a.ring_blocks, "ring_blocks");
}

}  // namespace

void launch_prepare(const PrepareParams& p, const PrepareLayout& l, const PrepareArgs& in, hipStream_t stream) {
  check_prepare_params(p);
  if (l.num_tokens == 0) return;
  check_launch(l, in);

  KernelArgs a{};
  a.num_tokens = l.num_tokens;
  a.num_reqs = l.num_reqs;
  a.hi = p.indexer_heads;
  a.di = p.indexer_dim;
  a.h = p.heads;
  a.g = p.kv_heads;
  a.d = p.head_dim;
  a.ratio = p.compress.ratio;
  a.ring_capacity = p.compress.ring_capacity;
  a.ring_slots = l.num_ring_slots;
  a.comp_rows = l.num_compressed_rows;
  a.kv_slots = l.num_kv_slots;
  a.norm_iq = norm_args(p.norm_index_q);
  a.norm_ik = norm_args(p.norm_index_k);
  a.norm_q = norm_args(p.norm_q);
  a.norm_k = norm_args(p.norm_k);
  a.rope_i = rope_args(p.rope_index);
  a.rope_m = rope_args(p.rope_main);
  a.round_pool = p.compress.round_storage;
  a.index_fp8 = p.compress.dtype == IndexerDtype::kFp8;
  a.index_kind = fp8_kind(p.compress.fp8_flavor);
  a.kv_fp8 = p.kv.dtype == KvDtype::kFp8;
  a.kv_kind = fp8_kind(p.kv.fp8_flavor);
  a.k_scale = p.kv.k_scale;
  a.v_scale = p.kv.v_scale;
  a.index_qk = in.index_qk;
  a.qg = in.qg;
  a.k = in.k;
  a.v = in.v;
  a.w_iq = in.index_q_norm_w;
  a.w_ik = in.index_k_norm_w;
  a.w_q = in.q_norm_w;
  a.w_k = in.k_norm_w;
  a.token_to_req = in.token_to_req;
  a.pos = in.pos;
  a.rope_pos = in.rope_pos;
  a.main_slot = in.main_slot;
  a.ring_slot = in.ring_slot;
  a.compressed_slot = in.compressed_slot;
  a.starts = in.starts;
  a.ring_blocks = in.ring_blocks;
  a.ring_keys = in.ring_keys;
  a.ring_rope = in.ring_rope;
  a.compressed = in.compressed;
  a.k_cache = in.k_cache;
  a.v_cache = in.v_cache;
  a.index_q = in.index_q;
  a.q = in.q;
  a.k_out = in.k_out;
  a.gate = in.gate;

  const unsigned blocks = static_cast<unsigned>(l.num_tokens + l.num_reqs);
  prepare_kernel<<<blocks, kThreads, 0, stream>>>(a);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
