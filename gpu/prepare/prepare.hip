// The fused prepare kernel (prepare.hpp says what it computes).
//
// Tasks: every row has H_I + H + G + 1 tasks: its indexer Q heads, its main
// Q heads (each with its gate copy), its K heads (each with its V copy and
// both KV cache writes) and one pooling slot; every request has one task,
// its ring writes and the pooling of the one group of it that can straddle
// the step's start. A task runs on one lane group of kGroup lanes
// (prepare_head.hpp). Block (x, y) of the grid is kGroups groups: for x < T
// tasks y·kGroups .. y·kGroups + kGroups - 1 of row x (those past the row's
// last task idle), for x >= T the request tasks ((x - T)·Y + y)·kGroups ..
// (Y the grid's height), so no group divides to find its task. No task
// waits for another, and the only barrier is the group fence of a request
// task. A group dispatches on its task's kind once and runs that kind's
// body (prepare_tasks.hpp).
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
// behind a barrier). Registers decide how many tasks are resident: a body
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
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "gpu/common/dependent_launch.hpp"
#include "gpu/prepare/prepare.hpp"
#include "gpu/prepare/prepare_tasks.hpp"

namespace qsa::gpu {

namespace {

using namespace prep;

// Registers are allocated for the worst path of a kernel: the model's
// bf16 kernel (main heads P = 1, T = 6) fits 64 per thread without
// spilling, so an NVIDIA SM keeps 32 warps resident; the others get what
// they need (the widest, P = 2 and T = 16, spills at 128).
template <class Sm, bool kFp8>
constexpr int kMinBlocks = Sm::kTail > 6 ? (Sm::kPairs == 2 ? 3 : 4) : Sm::kPairs == 1 && !kFp8 ? 8 : 5;

// Main heads (Q, K) have shape Sm, indexer rows (indexer Q, pooled keys,
// ring writes) shape Si. Block (x, y) holds tasks y·kGroups .. of row x
// (x < T) or, past the rows, request tasks: the row and the task come from
// the block index without a division.
template <class Sm, class Si, bool kFp8>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<Sm, kFp8>)) prepare_kernel(QSA_PREPARE_ARGS KernelArgs a) {
  // Launched as a programmatic dependent (launch_kernel): the blocks may be
  // resident before the stream's previous kernel (the projections, in a
  // step) has finished; every input is read after this wait. The next
  // kernel may be scheduled once every block has started.
  wait_for_primary();
  allow_dependent_launch();
  const int task = static_cast<int>(blockIdx.y) * kGroups + group_id();
  if (blockIdx.x >= a.num_tokens) {
    const int i = static_cast<int>((blockIdx.x - a.num_tokens) * gridDim.y) * kGroups + task;
    if (i < a.num_reqs) request_task<Si, kFp8>(a, i);
    return;
  }
  const int64_t t = blockIdx.x;
  if (task < a.hi) {
    head_task<Si, Kind::kIndexQ, kFp8>(a, t, task);
  } else if (task < a.hi + a.h) {
    head_task<Sm, Kind::kQ, false>(a, t, task - a.hi);  // Q and gate are always bf16
  } else if (task < a.hi + a.h + a.g) {
    head_task<Sm, Kind::kK, kFp8>(a, t, task - a.hi - a.h);
  } else if (task == a.row_tasks - 1) {
    pool_slot_task<Si, kFp8>(a, t);
  }
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

// host_inv_freq's values of p in device memory, kMaxPairs entries (zero
// past rotary_dim / 2), one table per (device, theta, rotary_dim, angle):
// computed and uploaded on first use (up to kMaxPairs std::pow calls and a
// synchronous copy), then found per launch. Why device memory and not the
// kernel's arguments: each lane reads its own pair's entry, and the
// constant cache serves a warp's different addresses one after another (the
// hottest stall of the 256-token profile, docs/performance.md, twelfth
// pass). The tables (512 bytes each) are never freed: a static destructor
// would run after the runtime's own teardown at exit. The first launch of a
// RoPE setting allocates and copies synchronously, so it must not be the one
// a CUDA/HIP graph capture records (none of this project's callers capture).
const double* device_inv_freq(const RopeParams& p) {
  int device = 0;
  QSA_GPU_CHECK(hipGetDevice(&device));
  uint64_t theta_bits = 0;  // the key holds theta's bits: a map cannot order NaN
  static_assert(sizeof theta_bits == sizeof p.theta, "fp64 theta");
  std::memcpy(&theta_bits, &p.theta, sizeof theta_bits);
  using Key = std::tuple<int, uint64_t, int, int>;
  static std::mutex mutex;
  static auto* tables = new std::map<Key, double*>();
  const std::lock_guard<std::mutex> lock(mutex);
  const Key key{device, theta_bits, p.rotary_dim, static_cast<int>(p.angle)};
  const auto hit = tables->find(key);
  if (hit != tables->end()) return hit->second;
  double host[kMaxPairs] = {};
  for (int j = 0; j < p.rotary_dim / 2 && j < kMaxPairs; ++j) host[j] = host_inv_freq(p, j);
  double* table = nullptr;
  QSA_GPU_CHECK(hipMalloc(&table, sizeof host));
  QSA_GPU_CHECK(hipMemcpy(table, host, sizeof host, hipMemcpyHostToDevice));
  tables->emplace(key, table);
  return table;
}

RopeArgs rope_args(const RopeParams& p) {
  RopeArgs r{};
  r.rotary_dim = p.rotary_dim;
  static_assert(kMaxPairs <= 64, "one mask bit per frequency pair");
  for (int j = 0; j < kMaxPairs; ++j) {
    const int axis = prepare_detail::mrope_axis_of(j, 3 * p.mrope_section[1], 3 * p.mrope_section[2]);
    if (axis == 1) r.axis_h |= uint64_t{1} << j;
    if (axis == 2) r.axis_w |= uint64_t{1} << j;
  }
  r.neox = p.style == RopeStyle::kNeox;
  r.exact_angle = p.angle == AngleMode::kExact;
  r.cos_sin = p.cos_sin == CosSinDtype::kExact ? 0 : p.cos_sin == CosSinDtype::kFp32 ? 1 : 2;
  r.per_op = p.per_op_rounding;
  r.round_output = p.round_output;
  r.inv_freq = device_inv_freq(p);
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
// are stored one by one).
bool rows_aligned(const PrepareParams& p, const PrepareArgs& in) {
  const bool idx_bf16 = p.compress.dtype != IndexerDtype::kFp8, kv_bf16 = p.kv.dtype != KvDtype::kFp8;
  const void* rows[] = {in.q,
                        in.k_out,
                        in.gate,
                        idx_bf16 ? in.index_q : nullptr,
                        idx_bf16 ? in.compressed : nullptr,
                        kv_bf16 ? in.k_cache : nullptr,
                        kv_bf16 ? in.v_cache : nullptr};
  for (const void* ptr : rows)
    if (!is_aligned(ptr, 4)) return false;
  return p.indexer_dim % 2 == 0 && p.head_dim % 2 == 0;
}

// Whether the heads fill shape S exactly and every fp32 row it reads starts
// 8-byte aligned for float2 loads (prepare_head.hpp, kExact): rows start at
// multiples of their dims, which an exact shape makes multiples of kGroup.
template <class S>
bool fills(int rotary_dim, int dim) {
  return rotary_dim == 2 * S::kPairs * kGroup && dim == rotary_dim + S::kTail * kGroup;
}

bool inputs_aligned(const PrepareArgs& in) {
  const void* rows[] = {in.index_qk,       in.qg, in.k, in.v, in.index_q_norm_w, in.index_k_norm_w, in.q_norm_w,
                        in.k_norm_w, in.ring_keys};
  for (const void* ptr : rows)
    if (!is_aligned(ptr, 8)) return false;
  return true;
}

// Block rows of a row's tasks (the grid's y extent).
int task_chunks(const PrepareParams& p) { return (row_tasks(p) + kGroups - 1) / kGroups; }

void check_launch(const PrepareParams& p, const PrepareLayout& l, const PrepareArgs& a) {
  if (l.num_tokens < 0 || l.num_reqs < 0 || l.num_ring_slots < 0 || l.num_compressed_rows < 0 || l.num_kv_slots < 0)
    throw InputError("gpu prepare: the launch layout has a negative size");
  if (task_chunks(p) > 65535)
    throw InputError("gpu prepare: " + std::to_string(row_tasks(p)) + " tasks per row exceed one launch (65535 blocks" +
                     " of " + std::to_string(kGroups) + " in a grid's y extent)");
  if (l.num_tokens > 0x7fffffff - int64_t{l.num_reqs})
    throw InputError("gpu prepare: " + std::to_string(l.num_tokens) + " rows and " + std::to_string(l.num_reqs) +
                     " requests exceed one launch (2^31 - 1 blocks in a grid's x extent)");
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

// prepare_kernel with the fewest slots that hold the heads (prepare_head.hpp):
// the model's exact shapes where they fit, else shared shapes for both kinds
// of rows with P pair slots and T = 6 (the model's main heads) or 16 (the
// widest heads) tail slots. A programmatic dependent launch: at decode
// sizes the kernel is a few microseconds of latency, and the launch and
// block scheduling after the previous kernel drains were a visible part of
// it (dependent_launch.hpp).
template <bool kFp8>
void launch_kernel(const PrepareParams& p, bool exact_ok, const KernelArgs& a, dim3 grid, hipStream_t stream) {
  static_assert(16 * kGroup >= kMaxDim && 2 * kGroup >= kMaxPairs, "the widest kernel holds every head accepted");
  using Main = Shape<1, 6, true>;
  using Indexer = Shape<1, 2, true>;
  if (exact_ok && fills<Main>(p.rope_main.rotary_dim, p.head_dim) &&
      fills<Indexer>(p.rope_index.rotary_dim, p.indexer_dim)) {
    launch_dependent(prepare_kernel<Main, Indexer, kFp8>, grid, dim3(kThreads), stream, a);
    return;
  }
  const int pairs = std::max(p.rope_index.rotary_dim, p.rope_main.rotary_dim) / 2;
  const int tail = std::max(p.indexer_dim - p.rope_index.rotary_dim, p.head_dim - p.rope_main.rotary_dim);
  auto run = [&](auto shape) {
    using S = decltype(shape);
    launch_dependent(prepare_kernel<S, S, kFp8>, grid, dim3(kThreads), stream, a);
  };
  if (pairs <= kGroup) {
    tail <= 6 * kGroup ? run(Shape<1, 6, false>{}) : run(Shape<1, 16, false>{});
  } else {
    tail <= 6 * kGroup ? run(Shape<2, 6, false>{}) : run(Shape<2, 16, false>{});
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

  // Rows, then enough blocks of the same height for the request tasks.
  const int chunks = task_chunks(p);
  const int64_t req_blocks = (l.num_reqs + int64_t{chunks} * kGroups - 1) / (int64_t{chunks} * kGroups);
  const dim3 grid(static_cast<unsigned>(l.num_tokens + req_blocks), static_cast<unsigned>(chunks));
  const bool exact_ok = a.vec2 && inputs_aligned(in);
  a.index_fp8 || a.kv_fp8 ? launch_kernel<true>(p, exact_ok, a, grid, stream)
                          : launch_kernel<false>(p, exact_ok, a, grid, stream);
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
