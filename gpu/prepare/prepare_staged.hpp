// The staged variant of the prepare kernel's row tasks, for the model's
// exact head shapes: each lane group runs one or two head tasks of a row
// (KernelArgs::group_tasks) and copies their rows (head row, gate or V row,
// norm weights) into shared memory before it computes either, so both
// tasks' loads are in flight at once and hold no registers while they fly.
//
// Why: the register-loading kernel keeps 36 warps of one task each on an
// H200 SM (56 registers), so 256 decode tokens (31 tasks each) take about
// 1.7 waves of blocks, each wave paying a whole chain (row loads, cos/sin,
// norm, stores) while DRAM idles between them. With two tasks per group the
// grid fits one wave, and the second task's rows arrive while the first is
// computed. Where the one-task grid fits a wave already, one task per group
// keeps twice the warps for the compute (the launcher picks). Include only
// from prepare.hip.
#pragma once

#include <cstdint>

#include "gpu/common/async_copy.hpp"
#include "gpu/prepare/prepare_tasks.hpp"

namespace qsa::gpu::prep {

inline constexpr int kMaxGroupTasks = 2;

// Floats of a row of an exact shape.
template <class S>
inline constexpr int kRowFloats = (2 * S::kPairs + S::kTail) * kGroup;

// One task's stage: head row, copied row, weights, each kRowFloats<Sm> long
// (the main heads are the widest rows of the model's shapes).
template <class Sm>
inline constexpr int kStageFloats = 3 * kRowFloats<Sm>;

// floats values of global src into shared dst (both 16-byte aligned:
// exact shapes' rows are multiples of kGroup floats, and the launcher checks
// the base pointers), spread over the group's lanes.
template <int kFloats>
__device__ inline void stage_row(float* dst, const float* src) {
  static_assert(kFloats % 4 == 0, "whole 16-byte pieces");
#pragma unroll
  for (int p = group_lane(); p < kFloats / 4; p += kGroup) async_copy16(dst + 4 * p, src + 4 * p);
}

// Stages head task K of row t into buf (head row at 0, copied row at
// kRowFloats<S>, weights at twice that), commits the copies as one group,
// then loads the task's metadata and computes its cos/sin while they fly.
template <class S, Kind K>
__device__ HeadMeta<S::kPairs> stage_head(const KernelArgs& a, int64_t t, int head, float* buf) {
  static_assert(S::kFull, "staged rows need an exact shape");
  constexpr int kDim = kRowFloats<S>;
  stage_row<kDim>(buf, head_row<K>(a, t, head));
  if constexpr (K != Kind::kIndexQ) stage_row<kDim>(buf + kDim, copy_row<K>(a, t, head));
  stage_row<kDim>(buf + 2 * kDim, norm_weights<K>(a));
  async_commit();
  return head_meta<S, K>(a, t);
}

// Head task K from its stage (after the wait and the group barrier).
template <class S, Kind K, bool kFp8>
__device__ void finish_head(const KernelArgs& a, int64_t t, int head, const HeadMeta<S::kPairs>& m,
                            const float* buf) {
  constexpr int kDim = kRowFloats<S>;
  float e[S::kSlots];
  Row<S> x, w;
  head_rows<S, K>(a, buf, buf + kDim, buf + 2 * kDim, x, w, e);
  head_finish<S, K, kFp8>(a, t, head, m, x, w, e);
}

// Task `task` of row t, phase one: head tasks stage their rows; the pooling
// slot and idle groups commit an empty group, so that every lane's wait
// counts the same groups.
template <class Sm, class Si>
__device__ HeadMeta<Sm::kPairs> stage_task(const KernelArgs& a, int64_t t, int task, float* buf) {
  static_assert(Sm::kPairs == Si::kPairs, "one metadata type for both kinds of heads");
  if (task < a.hi) return stage_head<Si, Kind::kIndexQ>(a, t, task, buf);
  if (task < a.hi + a.h) return stage_head<Sm, Kind::kQ>(a, t, task - a.hi, buf);
  if (task < a.hi + a.h + a.g) return stage_head<Sm, Kind::kK>(a, t, task - a.hi - a.h, buf);
  async_commit();
  return HeadMeta<Sm::kPairs>{};
}

// Phase two: head tasks compute from their stage; the pooling slot runs
// whole here, loading its members as the register kernel does (at decode it
// returns at once: a group's first member lies before the step, and the
// request task pools it).
template <class Sm, class Si, bool kFp8>
__device__ void finish_task(const KernelArgs& a, int64_t t, int task, const HeadMeta<Sm::kPairs>& m,
                            const float* buf) {
  if (task < a.hi) {
    finish_head<Si, Kind::kIndexQ, kFp8>(a, t, task, m, buf);
  } else if (task < a.hi + a.h) {
    finish_head<Sm, Kind::kQ, false>(a, t, task - a.hi, m, buf);  // Q and gate are always bf16
  } else if (task < a.hi + a.h + a.g) {
    finish_head<Sm, Kind::kK, kFp8>(a, t, task - a.hi - a.h, m, buf);
  } else if (task == a.row_tasks - 1) {
    pool_slot_task<Si, kFp8>(a, t);
  }
}

// The row tasks of block (t, y) in the staged kernel: group g runs tasks
// first = y · kGroups · n + g and, with n = 2, first + kGroups. Both tasks
// are staged before either is computed; the first is computed once its own
// group of copies has landed, while the second's may still fly.
template <class Sm, class Si, bool kFp8>
__device__ void staged_row_tasks(const KernelArgs& a, int64_t t, float (&stage)[kMaxGroupTasks][kStageFloats<Sm>]) {
  const int first = static_cast<int>(blockIdx.y) * kGroups * a.group_tasks + group_id();
  const HeadMeta<Sm::kPairs> m0 = stage_task<Sm, Si>(a, t, first, stage[0]);
  if (a.group_tasks == 1) {  // uniform over the launch
    async_wait<0>();
    wave_barrier();  // every lane's copies are visible to the group
    finish_task<Sm, Si, kFp8>(a, t, first, m0, stage[0]);
    return;
  }
  const int second = first + kGroups;
  const HeadMeta<Sm::kPairs> m1 = stage_task<Sm, Si>(a, t, second, stage[1]);
  async_wait<1>();
  wave_barrier();
  finish_task<Sm, Si, kFp8>(a, t, first, m0, stage[0]);
  async_wait<0>();
  wave_barrier();
  finish_task<Sm, Si, kFp8>(a, t, second, m1, stage[1]);
}

}  // namespace qsa::gpu::prep
