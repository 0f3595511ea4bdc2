// The fused prepare kernel (prepare.hpp says what it computes).
//
// Grid: one block per request (blocks [0, R)), then row_parts blocks per
// row (blocks [R, R + T · row_parts)), kThreads threads each. Every row has
// H_I + H + G + 1 head tasks: its indexer Q heads, its main Q heads (each
// with its gate copy), its K heads (each with its V copy and both KV cache
// writes) and one pooling slot; part p of row t runs tasks [p · kGroups,
// (p + 1) · kGroups), one per lane group of kGroup lanes (prepare_head.hpp).
//
// Why this shape: a step is latency-bound up to a few hundred rows (one
// decode token moves ~84 KB), so a task must cost one memory round trip, not
// one per element or per head. Each group issues all loads of its head row
// (and of its gate or V row) before it uses any, and no load of a row block
// waits on the row's metadata: padding rows compute like real rows and store
// zeros (a select on `real`), so token_to_req is not on any load's path. The
// cos/sin tables are filled once per block, by threads whose own loads are
// in flight, and the one __syncthreads() of a row block sits between the
// norm and the rotation, the first point that needs them. Angles, cos/sin,
// the rotation, the pooled sums and every store are the expressions the
// kernel always used, so they do not depend on this schedule; the fp32 norm
// sums in the order it always did on NVIDIA (a group is a warp), while on
// 64-wide waves its butterfly now spans 32 lanes, another order inside the
// same fp32 bound (tests/tolerances.hpp).
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
//    orders global memory within the block; the values it writes are read
//    from index_qk, which nothing writes, and may be loaded earlier), so the
//    pooling sees the ring as it stood before the step even when a long
//    chunk wraps around the ring onto the straddling group's members. Row
//    blocks never touch the ring.
//  - Only the first group of a request in a step can straddle: a group with
//    first position b·r < ctx = the step's first position and last position
//    >= ctx is the group containing ctx, b = ctx div r. Its completing row
//    t sees row t - (r - 1), which would hold its first member, outside the
//    request (token_to_req differs, or the row does not exist: rows of a
//    request are consecutive with consecutive positions, validated) and
//    skips it; every other completed group has all members in [ctx, ctx +
//    len) and is pooled by the pooling slot of its completing row from
//    index_qk (read-only). So each compressed row is written by exactly one
//    group, and compressed_slot values are distinct (validated).
//  - Main KV slots of real rows are distinct (validated); each K task writes
//    only its own row's slot and head, each task only its own output heads.
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

static_assert(kThreads >= 4 * kMaxPairs, "one thread per (RoPE table, cos | sin, pair) fills the row tables");
static_assert(kThreads % kGroup == 0 && kMaxDim % kThreads == 0, "whole groups; the request block's gather");

struct Shared {
  double row_cs[2][2][kMaxPairs];         // [rope][cos | sin][pair] at the row's position: 0 indexer, 1 main
  double pool_cs[2][kMaxPairs];           // [cos | sin][pair] at the pooled group's first position
  float scratch[kGroups][2 * kMaxPairs];  // per group: the rotary dims of its normed head row
  float pool_buf[kMaxDim];                // member values of the (one) pooling of the block
  double pool_sum[kMaxDim];               // and its sums
};

enum class Task { kIndexQ, kQ, kK, kPool, kNone };

// The pooled means of the pooling slot of row t: members rows first_row =
// t - (r - 1) .. t, which exist whenever t >= r - 1, read before the
// decision whether row t pools (row_block) has arrived.
template <int N>
__device__ void row_pool_means(const KernelArgs& a, Shared& sh, int64_t first_row, Lanes<N>& x) {
  const int64_t iq_stride = int64_t{a.hi + 1} * a.di;
  const float* raw = a.index_qk + first_row * iq_stride + int64_t{a.hi} * a.di;
  auto member = [&](int m) { return raw + m * iq_stride; };
  const int64_t total = int64_t{a.ratio} * a.di;
  for (int64_t base = 0; base < total; base += kMaxDim) {
    wave_barrier();  // the previous batch's reads of pool_buf come first
    gather_members<kMaxDim / kGroup>(base, total, a.di, group_lane(), kGroup, member, sh.pool_buf);
    wave_barrier();
    sum_members(base, kMaxDim, a.ratio, a.di, sh.pool_buf, sh.pool_sum);
  }
  pooled_means(a.di, a.ratio, a.round_pool, sh.pool_sum, x);
}

// One row's share of head tasks (see the top of the file); N slots per lane.
template <int N>
__device__ void row_block(const KernelArgs& a, Shared& sh, int64_t t, int part) {
  const int tid = static_cast<int>(threadIdx.x), gi = group_id(), lane = group_lane();
  const int task = part * kGroups + gi;
  const int heads = a.hi + a.h + a.g;
  const Task kind = task < a.hi           ? Task::kIndexQ
                    : task < a.hi + a.h   ? Task::kQ
                    : task < heads        ? Task::kK
                    : task == heads       ? Task::kPool
                                          : Task::kNone;
  const bool main_rope = kind == Task::kQ || kind == Task::kK;
  const int64_t T = a.num_tokens;
  const int64_t hd = int64_t{a.h} * a.d, gd = int64_t{a.g} * a.d, iq_stride = int64_t{a.hi + 1} * a.di;
  const int hh = task - a.hi, gg = task - a.hi - a.h;  // the task's Q head, K head
  const int dim = main_rope ? a.d : a.di;

  // ---- loads, all issued before any is used ----
  const int req = a.token_to_req[t];
  const float* src = nullptr;    // the head row to norm
  const float* extra = nullptr;  // the gate or V row the task copies
  if (kind == Task::kIndexQ) {
    src = a.index_qk + t * iq_stride + int64_t{task} * a.di;
  } else if (kind == Task::kQ) {
    src = a.qg + t * 2 * hd + int64_t{hh} * 2 * a.d;
    extra = src + a.d;
  } else if (kind == Task::kK) {
    src = a.k + t * gd + int64_t{gg} * a.d;
    extra = a.v + t * gd + int64_t{gg} * a.d;
  }
  const float* w = kind == Task::kIndexQ ? a.w_iq : kind == Task::kQ ? a.w_q : kind == Task::kK ? a.w_k : a.w_ik;
  Lanes<N> x, wl, e;
  if (src != nullptr) load_lanes(src, dim, x);
  if (kind != Task::kNone) load_lanes(w, dim, wl);
  if (extra != nullptr) load_lanes(extra, dim, e);
  const int64_t kv_slot = kind == Task::kK ? a.main_slot[t] : -1;
  const int64_t first_row = t - (a.ratio - 1);
  const bool pool_rows = kind == Task::kPool && first_row >= 0;
  int64_t cslot = -1;
  int first_req = -1;
  int64_t first3[3] = {0, 0, 0};
  if (pool_rows) {
    cslot = a.compressed_slot[t];
    first_req = a.token_to_req[first_row];
    for (int ax = 0; ax < 3; ++ax) first3[ax] = a.rope_pos[ax * T + first_row];
  }

  // ---- cos/sin tables, while the loads are in flight ----
  // Threads [0, 2·kMaxPairs) fill the indexer table, the next as many the
  // main one, where a task of the block uses it. Padding rows fill theirs
  // from whatever positions they hold (any int64 gives finite angles); their
  // outputs are zeros whatever the tables say.
  const int first_task = part * kGroups;
  const bool rope = tid < 2 * kMaxPairs ? first_task < a.hi : first_task < heads && first_task + kGroups > a.hi;
  if (tid < 4 * kMaxPairs && rope) {
    const int64_t pos3[3] = {a.rope_pos[t], a.rope_pos[T + t], a.rope_pos[2 * T + t]};
    if (tid < 2 * kMaxPairs) {  // separate calls: a runtime choice of argument struct would copy it
      fill_cos_sin(a.rope_i, pos3, tid, 2 * kMaxPairs, sh.row_cs[0][0], sh.row_cs[0][1]);
    } else {
      fill_cos_sin(a.rope_m, pos3, tid - 2 * kMaxPairs, 2 * kMaxPairs, sh.row_cs[1][0], sh.row_cs[1][1]);
    }
  }

  // ---- pooled means, norms and copies ----
  const bool real = req >= 0 && req < a.num_reqs;  // else a padding row: every output is zero
  float* scratch = sh.scratch[gi];
  if (pool_rows) {
    row_pool_means(a, sh, first_row, x);
    fill_cos_sin(a.rope_i, first3, lane, kGroup, sh.pool_cs[0], sh.pool_cs[1]);
  }
  if (src != nullptr || pool_rows) {
    const NormArgs norm = kind == Task::kIndexQ ? a.norm_iq
                          : kind == Task::kQ    ? a.norm_q
                          : kind == Task::kK    ? a.norm_k
                                                : a.norm_ik;  // a copy: 12 bytes
    norm_lanes(dim, norm, wl, main_rope ? a.rope_m.rotary_dim : a.rope_i.rotary_dim, x, scratch);
  }
  const bool kv_ok = real && kv_slot >= 0 && kv_slot < a.kv_slots;
  if (extra != nullptr) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int i = lane + k * kGroup;
      if (i >= dim) continue;
      // The projections are bf16 values already: copies. (For a float f,
      // bf16_bits_from_double(f) is float_to_bf16_bits(f): the round-to-odd
      // step returns an exact value unchanged.)
      if (kind == Task::kQ) a.gate[t * hd + int64_t{hh} * a.d + i] = real ? float_to_bf16_bits(e.v[k]) : 0;
      if (kind == Task::kK && kv_ok) store_kv(a, a.v_cache, kv_slot * gd + int64_t{gg} * a.d + i, e.v[k], a.v_scale);
    }
  }
  __syncthreads();  // row_cs, pool_cs and every group's scratch complete

  // ---- RoPE and stores; zero is the all-zero code of bf16 and of every fp8 flavour ----
  if (kind == Task::kIndexQ) {
    const int64_t out = (t * a.hi + task) * a.di;
    rope_store_lanes(dim, a.rope_i, sh.row_cs[0][0], sh.row_cs[0][1], scratch, x,
                     [&](int i, double v) { store_indexer(a, a.index_q, out + i, real ? v : 0.0); });
  } else if (kind == Task::kQ) {
    uint16_t* out = a.q + t * hd + int64_t{hh} * a.d;
    rope_store_lanes(dim, a.rope_m, sh.row_cs[1][0], sh.row_cs[1][1], scratch, x,
                     [&](int i, double v) { out[i] = real ? bf16_bits_from_double(v) : 0; });
  } else if (kind == Task::kK) {
    const int64_t out = t * gd + int64_t{gg} * a.d, cache = kv_slot * gd + int64_t{gg} * a.d;
    rope_store_lanes(dim, a.rope_m, sh.row_cs[1][0], sh.row_cs[1][1], scratch, x, [&](int i, double v) {
      a.k_out[out + i] = real ? bf16_bits_from_double(v) : 0;
      if (kv_ok) store_kv(a, a.k_cache, cache + i, v, a.k_scale);
    });
  } else if (pool_rows && real && first_req == req && cslot >= 0 && cslot < a.comp_rows) {
    // Pooled here only when every member lies in this step (the top of the file).
    rope_store_lanes(dim, a.rope_i, sh.pool_cs[0], sh.pool_cs[1], scratch, x,
                     [&](int i, double v) { store_indexer(a, a.compressed, cslot * a.di + i, v); });
  }
}

template <int N>
__device__ void request_block(const KernelArgs& a, Shared& sh, int req) {
  const int tid = static_cast<int>(threadIdx.x), n = kThreads;
  const int64_t begin = a.starts[req], end = a.starts[req + 1];
  const int r = a.ratio, C = a.ring_capacity;
  const int64_t ring_base = int64_t{a.ring_blocks[req]} * C;
  const int64_t iq_stride = int64_t{a.hi + 1} * a.di;
  const int64_t ctx = a.pos[begin];
  // The ring writes: the last C rows of the request (only they have a ring
  // slot). Their first pass is loaded before the pooling; it reads index_qk
  // and the metadata, never the ring.
  const int64_t lo = end - begin > C ? end - C : begin;
  const int64_t keys = (end - lo) * a.di, ropes = (end - lo) * 3;
  auto key_at = [&](int64_t e, int64_t* slot) {
    const int64_t row = lo + e / a.di;
    *slot = a.ring_slot[row];
    return a.index_qk[row * iq_stride + int64_t{a.hi} * a.di + e % a.di];
  };
  auto rope_at = [&](int64_t e, int64_t* slot) {
    const int64_t row = lo + e / 3;
    *slot = a.ring_slot[row];
    return a.rope_pos[(e % 3) * a.num_tokens + row];
  };
  int64_t key_slot = -1, rope_slot = -1, rope_val = 0;
  float key_val = 0.0f;
  if (tid < keys) key_val = key_at(tid, &key_slot);
  if (tid < ropes) rope_val = rope_at(tid, &rope_slot);

  // The straddling group: started before the step, completed inside it.
  // The whole block loads its members and its table; group 0 pools them.
  // Everything is computed before cslot arrives (every read stays in bounds
  // whatever it is) and stored only where it names a compressed row.
  const int64_t first = ctx / r * r, last = first + r - 1;
  if (first != ctx && last < ctx + (end - begin)) {  // uniform over the block
    const int64_t cslot = a.compressed_slot[begin + (last - ctx)];
    const int64_t slot0 = ring_base + first % C;  // member 0 is older than the step
    const bool slot0_ok = slot0 >= 0 && slot0 < a.ring_slots;
    Lanes<N> x, wl;
    if (group_id() == 0) load_lanes(a.w_ik, a.di, wl);
    if (tid < 2 * kMaxPairs) {
      int64_t first3[3] = {0, 0, 0};
      for (int ax = 0; ax < 3; ++ax) first3[ax] = slot0_ok ? a.ring_rope[slot0 * 3 + ax] : 0;
      fill_cos_sin(a.rope_i, first3, tid, 2 * kMaxPairs, sh.pool_cs[0], sh.pool_cs[1]);
    }
    const int64_t f0 = first % C;
    auto member = [&](int m) -> const float* {
      if (first + m >= ctx) return a.index_qk + (begin + first + m - ctx) * iq_stride + int64_t{a.hi} * a.di;
      // (first + m) mod C without a division: m < r <= C. Out-of-range
      // slots (rejected by validate_prepare) read member 0's row rather
      // than memory outside the ring.
      const int64_t slot = ring_base + (f0 + m < C ? f0 + m : f0 + m - C);
      return a.ring_keys + (slot >= 0 && slot < a.ring_slots ? slot : (slot0_ok ? slot0 : 0)) * a.di;
    };
    const int64_t total = int64_t{r} * a.di;
    for (int64_t base = 0; base < total; base += kMaxDim) {
      gather_members<kMaxDim / kThreads>(base, total, a.di, tid, kThreads, member, sh.pool_buf);
      __syncthreads();
      if (group_id() == 0) sum_members(base, kMaxDim, r, a.di, sh.pool_buf, sh.pool_sum);
      __syncthreads();  // the sums' reads of pool_buf come before the next batch; publishes pool_cs
    }
    if (group_id() == 0) {
      pooled_means(a.di, r, a.round_pool, sh.pool_sum, x);
      norm_lanes(a.di, a.norm_ik, wl, a.rope_i.rotary_dim, x, sh.scratch[0]);
      wave_barrier();  // the group's scratch complete
      const bool keep = cslot >= 0 && cslot < a.comp_rows;
      rope_store_lanes(a.di, a.rope_i, sh.pool_cs[0], sh.pool_cs[1], sh.scratch[0], x, [&](int i, double v) {
        if (keep) store_indexer(a, a.compressed, cslot * a.di + i, v);
      });
    }
  }
  __syncthreads();  // every ring read of the pooling happens before the writes below

  auto put_key = [&](int64_t slot, int64_t e, float v) {
    if (slot >= 0 && slot < a.ring_slots) a.ring_keys[slot * a.di + e % a.di] = v;
  };
  auto put_rope = [&](int64_t slot, int64_t e, int64_t v) {
    if (slot >= 0 && slot < a.ring_slots) a.ring_rope[slot * 3 + e % 3] = v;
  };
  if (tid < keys) put_key(key_slot, tid, key_val);
  if (tid < ropes) put_rope(rope_slot, tid, rope_val);
  for (int64_t e = tid + n; e < keys; e += n) {
    int64_t slot = -1;
    const float v = key_at(e, &slot);
    put_key(slot, e, v);
  }
  for (int64_t e = tid + n; e < ropes; e += n) {
    int64_t slot = -1;
    const int64_t v = rope_at(e, &slot);
    put_rope(slot, e, v);
  }
}

// Registers are allocated for the worst path of a kernel; these bounds keep
// three blocks resident per NVIDIA SM (80 registers) for the model's head
// dims, at the cost of a few spilled words (on HIP: three waves per SIMD).
template <int N>
__global__ void __launch_bounds__(kThreads, N <= 8 ? 3 : 2) prepare_kernel(KernelArgs a) {
  __shared__ Shared sh;
  if (blockIdx.x < static_cast<unsigned>(a.num_reqs)) {
    request_block<N>(a, sh, static_cast<int>(blockIdx.x));
  } else {
    const unsigned rb = blockIdx.x - static_cast<unsigned>(a.num_reqs);  // 32-bit: no int64 division
    const unsigned parts = static_cast<unsigned>(a.row_parts);
    row_block<N>(a, sh, static_cast<int64_t>(rb / parts), static_cast<int>(rb % parts));
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

// The inverse frequencies of p: host_inv_freq's values, remembered per host
// thread for the last two (theta, rotary_dim, angle) seen (a launch has an
// indexer and a main RoPE). Up to 2 · kMaxPairs std::pow calls per launch
// cost microseconds of host time, as long as the whole kernel at decode.
const double* inv_freq_table(const RopeParams& p) {
  struct Entry {
    bool valid = false;
    double theta = 0.0;
    int rotary_dim = 0;
    AngleMode angle = AngleMode::kExact;
    double inv[kMaxPairs] = {};
  };
  thread_local Entry cache[2];
  thread_local int next = 0;
  for (const Entry& e : cache)
    if (e.valid && e.theta == p.theta && e.rotary_dim == p.rotary_dim && e.angle == p.angle) return e.inv;
  Entry& e = cache[next];
  next = 1 - next;
  e.valid = true;
  e.theta = p.theta;
  e.rotary_dim = p.rotary_dim;
  e.angle = p.angle;
  for (int j = 0; j < p.rotary_dim / 2; ++j) e.inv[j] = host_inv_freq(p, j);
  return e.inv;
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
  const double* inv = inv_freq_table(p);
  for (int j = 0; j < p.rotary_dim / 2; ++j) r.inv_freq[j] = inv[j];
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

// Blocks per row: every row has H_I + H + G head tasks and a pooling slot.
int row_parts(const PrepareParams& p) {
  return (p.indexer_heads + p.heads + p.kv_heads + 1 + kGroups - 1) / kGroups;
}

void check_launch(const PrepareParams& p, const PrepareLayout& l, const PrepareArgs& a) {
  if (l.num_tokens < 0 || l.num_reqs < 0 || l.num_ring_slots < 0 || l.num_compressed_rows < 0 || l.num_kv_slots < 0)
    throw InputError("gpu prepare: the launch layout has a negative size");
  if (l.num_tokens > (0x7fffffff - int64_t{l.num_reqs}) / row_parts(p))
    throw InputError("gpu prepare: " + std::to_string(l.num_tokens) + " rows of " + std::to_string(row_parts(p)) +
                     " blocks and " + std::to_string(l.num_reqs) + " requests exceed one launch (2^31 - 1 blocks)");
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
  check_launch(p, l, in);

  KernelArgs a{};
  a.num_tokens = l.num_tokens;
  a.num_reqs = l.num_reqs;
  a.hi = p.indexer_heads;
  a.di = p.indexer_dim;
  a.h = p.heads;
  a.g = p.kv_heads;
  a.d = p.head_dim;
  a.row_parts = row_parts(p);
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

  const unsigned blocks = static_cast<unsigned>(l.num_tokens * a.row_parts + l.num_reqs);
  // Slots per lane: the fewest that hold both head dims (prepare_head.hpp).
  const int widest = p.indexer_dim > p.head_dim ? p.indexer_dim : p.head_dim;
  if (widest <= 4 * kGroup) {
    prepare_kernel<4><<<blocks, kThreads, 0, stream>>>(a);
  } else if (widest <= 8 * kGroup) {
    prepare_kernel<8><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    static_assert(16 * kGroup >= kMaxDim, "the widest kernel holds every head dim check_prepare_params accepts");
    prepare_kernel<16><<<blocks, kThreads, 0, stream>>>(a);
  }
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
