// The fused prepare kernel (prepare.hpp says what it computes).
//
// Tasks: every row has H_I + H + G + 1 tasks: its indexer Q heads, its main
// Q heads (each with its gate copy), its K heads (each with its V copy and
// both KV cache writes) and one pooling slot; every request has one task,
// its ring writes and the pooling of the one group of it that can straddle
// the step's start. A task runs on one lane group of kGroup lanes
// (prepare_head.hpp): tasks [0, R) are the requests', then row t's tasks
// follow at R + t · (H_I + H + G + 1). A block is kGroups independent
// groups; no task waits for another, and the only barrier is the group
// fence of a request task.
//
// Why this shape: a step is latency-bound up to a few hundred rows (one
// decode token moves ~85 KB) and issue-bound beyond, so a task must cost
// one memory round trip and a short chain of few instructions. Each group
// issues all loads of its head row (and of its gate or V row) before it
// uses any, and no load of a head waits on the row's metadata: padding rows
// compute like real rows and store zeros (Dest::zero), so token_to_req is
// not on any load's path. Each lane rotates whole frequency pairs with the
// cos/sin it computes itself (one fp64 sincos per pair slot, after the
// loads are issued), so a task needs neither shared memory nor a barrier:
// every group of a row computes the same cos/sin, which costs less than the
// previous kernel's tables (4 blocks per row, each filling the row's tables
// behind a barrier). Registers decide how many tasks are resident: Task
// holds indices only, the store destinations are formed after the norm, and
// kernels without fp8 stores carry no fp8 code (kFp8), so the model's kernel
// fits 64 registers without spilling. Angles, cos/sin, the rotation, the
// pooled sums and every store are the reference's expressions, so they do
// not depend on this schedule; the fp32 norm sums in another order than
// before, inside the same fp32 bound (tests/tolerances.hpp).
//
// Race freedom (every inter-task hazard of the launch):
//  - The ring is read only by request tasks, each only in its own ring
//    block b_i = ring_blocks[i] (slots b_i·C + q mod C), and only while
//    pooling its straddling group. It is written only by request tasks:
//    task i writes ring_slot[t] for its own rows, which validate_prepare
//    pins to b_i·C + p mod C, inside b_i. ring_blocks are distinct per
//    request (validated), so no task writes a slot another task reads or
//    writes. Inside task i, every read of the pooling has returned before
//    the group fence that precedes the task's ring writes (the pooled sums
//    use every value read, and the fence orders the group's memory
//    accesses), so the pooling sees the ring as it stood before the step
//    even when a long chunk wraps around the ring onto the straddling
//    group's members. Row tasks never touch the ring.
//  - Only the first group of a request in a step can straddle: a group with
//    first position b·r < ctx = the step's first position and last position
//    >= ctx is the group containing ctx, b = ctx div r. Its completing row
//    t sees row t - (r - 1), which would hold its first member, outside the
//    request (token_to_req differs, or the row does not exist: rows of a
//    request are consecutive with consecutive positions, validated) and
//    skips it; every other completed group has all members in [ctx, ctx +
//    len) and is pooled by the pooling slot of its completing row from
//    index_qk (read-only). So each compressed row is written by exactly one
//    task, and compressed_slot values are distinct (validated).
//  - Main KV slots of real rows are distinct (validated); each K task writes
//    only its own row's slot and head, each task only its own output heads.
//  - Nothing in the launch reads the compressed or the KV cache.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gpu/prepare/prepare.hpp"
#include "gpu/prepare/prepare_head.hpp"

namespace qsa::gpu {

namespace {

using namespace prep;

// The members of a pooled group: member m < from_ring is the raw key in
// ring slot ring_base + (f0 + m) mod C (older than the step), member m >=
// from_ring the raw key of row row0 + (m - from_ring).
struct Members {
  int64_t row0 = 0;
  int from_ring = 0;
  int f0 = 0;
  int64_t ring_base = 0;
  int64_t fallback = 0;  // a slot inside the ring, read instead of one outside (validate_prepare rejects those)
};

enum class Kind { kIndexQ, kQ, kK, kPooled };

// What a lane group produces: one row normed, rotated and stored. Only
// indices and metadata: pointers are formed where they are used, so that no
// register holds one through the task.
struct Task {
  Kind kind = Kind::kPooled;
  bool active = false;
  int head = 0;             // of its kind
  int64_t row = 0;          // the head's row
  bool pad = false;         // a padding row: every output is zero
  int64_t slot = 0;         // K: main KV slot; kPooled: compressed row (both checked where used)
  int64_t pos3[3] = {0, 0, 0};  // the (t, h, w) RoPE position
  Members members;          // kPooled
};

__device__ inline bool is_main(Kind k) { return k == Kind::kQ || k == Kind::kK; }

__device__ inline const float* raw_key(const KernelArgs& a, int64_t row) {
  return a.index_qk + row * (int64_t{a.hi + 1} * a.di) + int64_t{a.hi} * a.di;
}

__device__ inline const float* member_row(const KernelArgs& a, const Members& g, int m) {
  if (m >= g.from_ring) return raw_key(a, g.row0 + (m - g.from_ring));
  const int at = g.f0 + m;  // (f0 + m) mod C without a division: f0 < C, m < r <= C
  const int64_t slot = g.ring_base + (at < a.ring_capacity ? at : at - a.ring_capacity);
  return a.ring_keys + (slot >= 0 && slot < a.ring_slots ? slot : g.fallback) * a.di;
}

// The head row a head task norms, and the row it copies (gate, V) or null.
__device__ inline const float* head_row(const KernelArgs& a, const Task& k) {
  if (k.kind == Kind::kIndexQ) return a.index_qk + k.row * (int64_t{a.hi + 1} * a.di) + int64_t{k.head} * a.di;
  if (k.kind == Kind::kQ) return a.qg + (k.row * a.h + k.head) * 2 * a.d;
  return a.k + (k.row * a.g + k.head) * a.d;
}

__device__ inline const float* extra_row(const KernelArgs& a, const Task& k) {
  if (k.kind == Kind::kQ) return a.qg + (k.row * a.h + k.head) * 2 * a.d + a.d;
  return k.kind == Kind::kK ? a.v + (k.row * a.g + k.head) * a.d : nullptr;
}

__device__ inline const float* norm_weights(const KernelArgs& a, Kind k) {
  return k == Kind::kIndexQ ? a.w_iq : k == Kind::kQ ? a.w_q : k == Kind::kK ? a.w_k : a.w_ik;
}

__device__ inline const NormArgs& norm_of(const KernelArgs& a, Kind k) {
  return k == Kind::kIndexQ ? a.norm_iq : k == Kind::kQ ? a.norm_q : k == Kind::kK ? a.norm_k : a.norm_ik;
}

__device__ inline bool kv_ok(const KernelArgs& a, const Task& k) {
  return k.kind == Kind::kK && !k.pad && k.slot >= 0 && k.slot < a.kv_slots;
}

__device__ inline Dest indexer_dest(const KernelArgs& a, void* base, int64_t offset, bool on, bool zero) {
  return code_dest(base, offset, on, zero, a.index_fp8, a.index_kind, 1.0);
}

// Where the rotated row goes.
__device__ inline Dest out_dest(const KernelArgs& a, const Task& k) {
  switch (k.kind) {
    case Kind::kIndexQ: return indexer_dest(a, a.index_q, (k.row * a.hi + k.head) * a.di, true, k.pad);
    case Kind::kQ: return bf16_dest(a.q + (k.row * a.h + k.head) * a.d, true, k.pad);
    case Kind::kK: return bf16_dest(a.k_out + (k.row * a.g + k.head) * a.d, true, k.pad);
    default: {
      const bool keep = k.slot >= 0 && k.slot < a.comp_rows;
      return indexer_dest(a, a.compressed, keep ? k.slot * a.di : 0, keep, false);
    }
  }
}

// The K (V) row's copy in the KV cache: off for other tasks.
__device__ inline Dest kv_dest(const KernelArgs& a, const Task& k, void* cache, double scale) {
  const bool ok = kv_ok(a, k);
  return code_dest(cache, ok ? (k.slot * a.g + k.head) * a.d : 0, ok, false, a.kv_fp8, a.kv_kind, scale);
}

// Where the extra row goes: the gate, or V to the cache.
__device__ inline Dest extra_dest(const KernelArgs& a, const Task& k) {
  if (k.kind == Kind::kQ) return bf16_dest(a.gate + (k.row * a.h + k.head) * a.d, true, k.pad);
  return kv_dest(a, k, a.v_cache, a.v_scale);
}

// Task `task` of row t: a head, or the pooling slot. The pooling slot pools
// the group row t completes when all its members are rows of this step,
// rows first_row = t - (r - 1) .. t of one request (the top of the file).
__device__ Task row_task(const KernelArgs& a, int64_t t, int task) {
  const int req = a.token_to_req[t];
  Task k;
  k.active = true;
  k.row = t;
  k.pad = req < 0 || req >= a.num_reqs;
  int64_t rope_row = t;
  if (task < a.hi) {
    k.kind = Kind::kIndexQ;
    k.head = task;
  } else if (task < a.hi + a.h) {
    k.kind = Kind::kQ;
    k.head = task - a.hi;
  } else if (task < a.hi + a.h + a.g) {
    k.kind = Kind::kK;
    k.head = task - a.hi - a.h;
    k.slot = a.main_slot[t];
  } else {
    const int64_t first_row = t - (a.ratio - 1);
    k.kind = Kind::kPooled;
    k.active = first_row >= 0;
    if (k.active) {
      k.slot = a.compressed_slot[t];
      k.active = !k.pad && a.token_to_req[first_row] == req && k.slot >= 0 && k.slot < a.comp_rows;
      k.members.row0 = first_row;
      rope_row = first_row;  // the pooled row rotates at its first member's position
    }
  }
  for (int ax = 0; ax < 3; ++ax) k.pos3[ax] = a.rope_pos[ax * a.num_tokens + rope_row];
  return k;
}

// The request's straddling group, started before the step and completed
// inside it; inactive if there is none.
__device__ Task request_task(const KernelArgs& a, int64_t begin, int64_t end, int64_t ring_base) {
  const int r = a.ratio, C = a.ring_capacity;
  const int64_t ctx = a.pos[begin];
  const int64_t first = ctx / r * r, last = first + r - 1;
  Task k;
  k.active = first != ctx && last < ctx + (end - begin);
  if (!k.active) return k;
  k.slot = a.compressed_slot[begin + (last - ctx)];
  const int f0 = static_cast<int>(first % C);
  const int64_t slot0 = ring_base + f0;  // member 0 is older than the step
  const bool slot0_ok = slot0 >= 0 && slot0 < a.ring_slots;
  k.members.row0 = begin;
  k.members.from_ring = static_cast<int>(ctx - first);
  k.members.f0 = f0;
  k.members.ring_base = ring_base;
  k.members.fallback = slot0_ok ? slot0 : 0;
  for (int ax = 0; ax < 3; ++ax) k.pos3[ax] = slot0_ok ? a.ring_rope[slot0 * 3 + ax] : 0;
  return k;
}

// Loads, norm, RoPE and stores of one task (prepare_head.hpp), in the order
// that keeps few registers live: all loads, then the cos/sin (while they
// are in flight), the extra row's copy, the norm, the rotated stores.
template <int T, int P, bool kFp8>
__device__ void run_task(const KernelArgs& a, const Task& k) {
  constexpr int N = Row<T, P>::kSlots;  // the extra row: elements 2·lane + 2·kGroup·c, + 1 in slots 2c, 2c + 1
  const bool main = is_main(k.kind);
  const RopeArgs& r = main ? a.rope_m : a.rope_i;
  const int dim = main ? a.d : a.di;
  const float* extra = extra_row(a, k);
  float e[N];
  Row<T, P> x, w;
  if (k.kind == Kind::kPooled) {
    pooled_row(dim, r, a.ratio, a.round_pool, [&](int m) { return member_row(a, k.members, m); }, x);
    load_row(a.w_ik, dim, r, w);  // after the sums: not live next to them
  } else {
    // A task without an extra row loads its head row twice rather than
    // branch around the loads (load_two says why); the copies are zeroed.
    const float* src = head_row(a, k);
    const float* e_src = extra != nullptr ? extra : src;
#pragma unroll
    for (int n = 0; n < N; n += 2) {
      load_two(e_src, 2 * group_lane() + kGroup * n, dim, e[n], e[n + 1]);
      if (extra == nullptr) e[n] = e[n + 1] = 0.0f;
    }
    load_row(src, dim, r, x);
    load_row(norm_weights(a, k.kind), dim, r, w);
  }
  double c[P], s[P];
  lane_cos_sin(r, k.pos3, c, s);
  if (extra != nullptr) {
    const Dest d = extra_dest(a, k);
    auto one = [&](int i, float v) { put<kFp8>(d, i, v); };
    auto two = [&](int i, float v0, float v1) { put2<kFp8>(d, i, v0, v1); };
#pragma unroll
    for (int n = 0; n < N; n += 2) {  // the projections are bf16 values already: copies
      const int i = 2 * group_lane() + kGroup * n;
      if (i < dim) store_two(i, dim, a.vec2, e[n], e[n + 1], one, two);
    }
  }
  norm_row(dim, norm_of(a, k.kind), r, w, x);
  const Dest out = out_dest(a, k), cache = kv_dest(a, k, a.k_cache, a.k_scale);
  rope_store_row(
      dim, r, a.vec2, c, s, x,
      [&](int i, auto v) {
        put<kFp8>(out, i, v);
        put<kFp8>(cache, i, v);
      },
      [&](int i, float v0, float v1) {
        put2<kFp8>(out, i, v0, v1);
        put2<kFp8>(cache, i, v0, v1);
      });
}

// The ring writes of a request: its last C rows' raw keys and (t, h, w)
// positions, a row at a time (all loads of a row issued before its stores).
template <int N>
__device__ void write_ring(const KernelArgs& a, int64_t begin, int64_t end) {
  const int lane = group_lane();
  const int C = a.ring_capacity;
  for (int64_t row = end - begin > C ? end - C : begin; row < end; ++row) {
    const int64_t slot = a.ring_slot[row];
    const float* key = raw_key(a, row);
    float v[N];
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int i = lane + n * kGroup;
      v[n] = i < a.di ? key[i] : 0.0f;
    }
    const int64_t rope = lane < 3 ? a.rope_pos[lane * a.num_tokens + row] : 0;
    if (slot < 0 || slot >= a.ring_slots) continue;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int i = lane + n * kGroup;
      if (i < a.di) a.ring_keys[slot * a.di + i] = v[n];
    }
    if (lane < 3) a.ring_rope[slot * 3 + lane] = rope;
  }
}

// Registers are allocated for the worst path of a kernel: the model's
// bf16 kernel (6, 1, false) fits 64 per thread without spilling, so an
// NVIDIA SM keeps 32 warps resident; the others get what they need.
template <int T, int P, bool kFp8>
constexpr int kMinBlocks = T > 6 ? 4 : P == 1 && !kFp8 ? 8 : 5;

template <int T, int P, bool kFp8>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<T, P, kFp8>)) prepare_kernel(QSA_PREPARE_ARGS KernelArgs a) {
  const unsigned task = blockIdx.x * kGroups + static_cast<unsigned>(group_id());
  const unsigned reqs = static_cast<unsigned>(a.num_reqs);
  int64_t begin = 0, end = 0;
  Task k;
  if (task < reqs) {
    begin = a.starts[task];
    end = a.starts[task + 1];
    k = request_task(a, begin, end, int64_t{a.ring_blocks[task]} * a.ring_capacity);
  } else {
    const unsigned rt = task - reqs, per_row = static_cast<unsigned>(a.row_tasks);  // 32-bit: no int64 division
    const int64_t t = rt / per_row;
    if (t >= a.num_tokens) return;  // the last block's spare groups
    k = row_task(a, t, static_cast<int>(rt % per_row));
  }
  if (k.active) run_task<T, P, kFp8>(a, k);
  if (task >= reqs) return;
  __threadfence_block();  // every ring read of the pooling happens before the writes below
  wave_barrier();
  write_ring<Row<T, P>::kSlots>(a, begin, end);
}

__global__ void encode_bf16_kernel(const float* f, const double* d, int64_t n, uint16_t* from_float,
                                   uint16_t* from_double, uint32_t* pairs) {
  const int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n) return;
  from_float[i] = bf16_code(f[i]);
  from_double[i] = bf16_code(d[i]);
  pairs[i] = bf16_pair_code(f[i], f[i ^ 1]);
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

// Every row has H_I + H + G head tasks and a pooling slot.
int row_tasks(const PrepareParams& p) { return p.indexer_heads + p.heads + p.kv_heads + 1; }

// Whether every bf16 output row starts 4-byte aligned for bf16 pair stores
// (KernelArgs::vec2): even head dims and aligned base pointers (fp8 codes
// are stored one by one; the fp32 inputs are read element by element).
bool rows_aligned(const PrepareParams& p, const PrepareArgs& in) {
  auto aligned = [](const void* ptr, uintptr_t n) { return reinterpret_cast<uintptr_t>(ptr) % n == 0; };
  const bool idx_bf16 = p.compress.dtype != IndexerDtype::kFp8, kv_bf16 = p.kv.dtype != KvDtype::kFp8;
  const void* rows[] = {in.q,
                        in.k_out,
                        in.gate,
                        idx_bf16 ? in.index_q : nullptr,
                        idx_bf16 ? in.compressed : nullptr,
                        kv_bf16 ? in.k_cache : nullptr,
                        kv_bf16 ? in.v_cache : nullptr};
  for (const void* ptr : rows)
    if (!aligned(ptr, 4)) return false;
  return p.indexer_dim % 2 == 0 && p.head_dim % 2 == 0;
}

void check_launch(const PrepareParams& p, const PrepareLayout& l, const PrepareArgs& a) {
  if (l.num_tokens < 0 || l.num_reqs < 0 || l.num_ring_slots < 0 || l.num_compressed_rows < 0 || l.num_kv_slots < 0)
    throw InputError("gpu prepare: the launch layout has a negative size");
  if (l.num_tokens > (0x7fffffff - int64_t{l.num_reqs}) / row_tasks(p))
    throw InputError("gpu prepare: " + std::to_string(l.num_tokens) + " rows of " + std::to_string(row_tasks(p)) +
                     " tasks and " + std::to_string(l.num_reqs) + " requests exceed one launch (2^31 - 1 tasks)");
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

// prepare_kernel<T, P, kFp8> with the fewest tail slots T that hold
// `tail` values: 6 (the model's main heads: 256 values, 64 rotary) or 16
// (the widest heads).
template <int P, bool kFp8>
void launch_kernel(int tail, const KernelArgs& a, unsigned blocks, hipStream_t stream) {
  static_assert(16 * kGroup >= kMaxDim && 2 * kGroup >= kMaxPairs, "the widest kernel holds every head accepted");
  if (tail <= 6 * kGroup) {
    prepare_kernel<6, P, kFp8><<<blocks, kThreads, 0, stream>>>(a);
  } else {
    prepare_kernel<16, P, kFp8><<<blocks, kThreads, 0, stream>>>(a);
  }
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
  a.row_tasks = row_tasks(p);
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
  a.vec2 = rows_aligned(p, in);
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

  const int64_t tasks = l.num_reqs + l.num_tokens * a.row_tasks;
  const auto blocks = static_cast<unsigned>((tasks + kGroups - 1) / kGroups);
  // Slots per lane: pair slots for the most frequency pairs, tail slots for
  // the most dims past the rotary ones (prepare_head.hpp).
  const int pairs = std::max(p.rope_index.rotary_dim, p.rope_main.rotary_dim) / 2;
  const int tail = std::max(p.indexer_dim - p.rope_index.rotary_dim, p.head_dim - p.rope_main.rotary_dim);
  const bool fp8 = a.index_fp8 || a.kv_fp8;
  if (pairs <= kGroup) {
    fp8 ? launch_kernel<1, true>(tail, a, blocks, stream) : launch_kernel<1, false>(tail, a, blocks, stream);
  } else {
    fp8 ? launch_kernel<2, true>(tail, a, blocks, stream) : launch_kernel<2, false>(tail, a, blocks, stream);
  }
  QSA_GPU_CHECK_LAUNCH();
}

void encode_bf16_on_device(const float* f, const double* d, int64_t n, uint16_t* from_float, uint16_t* from_double,
                           uint32_t* pairs, hipStream_t stream) {
  if (n <= 0) return;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  encode_bf16_kernel<<<blocks, kThreads, 0, stream>>>(f, d, n, from_float, from_double, pairs);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
