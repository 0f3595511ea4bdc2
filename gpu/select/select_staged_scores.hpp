// Phase 1 of the decode path for rows longer than kSelectDecodeChunk: the
// fp32 scores of one query row's blocks, keys staged through shared memory.
// Device code (and the layout arithmetic its launcher shares), included by
// select.hip only.
//
// Why staging: a thread must score one whole key (score_with's fma chains
// run over a key's elements in order), so when each lane loads its own key
// from global memory, one load instruction of a wave touches a wave's worth
// of different 128-byte lines; the L1 serves about one line per cycle, which
// held the direct reader to ~42% of the copy bandwidth on an H200. Here a
// wave first copies its keys with consecutive lanes on consecutive 16-byte
// pieces (one load instruction covers whole lines) into shared memory, and
// only then does each lane read its own key, from there.
//
// Layout: every wave owns a ring of kStagedSlots slots; a slot holds
// warpSize keys (lane l scores key l), key rows staged_stride(vectors)
// 16-byte vectors apart. The stride is odd, so the 8 lanes whose 16-byte
// reads share one 128-byte shared-memory wavefront read 8 different bank
// groups: conflict-free. On NVIDIA the copies are cp.async: while a wave
// scores one slot the next one's are in flight, holding no registers.
// Elsewhere they are plain loads and stores, made when the slot is issued
// (the wave waits for them; other waves hide that), into a single slot.
//
// Work: wave w of block (t, y) scores the stages first + i · step + [0,
// warpSize), first = y · blockDim + w · warpSize, step = gridDim.y ·
// blockDim; the launcher keeps gridDim.y small enough that every block
// streams many stages (see launch_staged in select.hip). The arithmetic is
// score_vectors' (select_decode_scores.hpp), unchanged: only where the key
// bytes come from differs, so the bits are the other readers'.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "gpu/common/wave.hpp"
#include "gpu/select/select_codes.hpp"
#include "gpu/select/select_decode_scores.hpp"
#include "gpu/select/select_scores.hpp"

#if defined(QSA_GPU_CUDA)
#include "gpu/common/mma_sm80.hpp"
#endif

namespace qsa::gpu::select_detail {

// Ring slots per wave: with cp.async one is scored while the next lands;
// synchronous copies (no cp.async) gain nothing from a second slot, which
// would only halve the waves a 64 KiB LDS holds.
#if defined(QSA_GPU_CUDA)
inline constexpr int kStagedSlots = 2;
#else
inline constexpr int kStagedSlots = 1;
#endif
inline constexpr int kStagedMaxWaves = 4;  // waves per block; the launcher takes fewer when the rings do not fit
inline constexpr int kWidestWave = 64;     // only bounds the block size (__launch_bounds__)

// Distance between staged key rows in 16-byte vectors: the row itself,
// rounded up to an odd count (see the file comment).
QSA_SELECT_HD inline int staged_stride(int vectors) { return vectors | 1; }

// Dynamic shared memory of a staged scoring block: the fp8 table (when
// `table_floats`), the decoded query row, then `waves` rings.
QSA_SELECT_HD inline size_t staged_shared_bytes(int table_floats, int query_values, int vectors, int wave, int waves) {
  const size_t ring = sizeof(uint4) * kStagedSlots * static_cast<size_t>(wave) * staged_stride(vectors);
  return sizeof(float) * (static_cast<size_t>(table_floats) + query_values) + ring * waves;
}

// cp.async's group bookkeeping; no-ops where copies are synchronous.
__device__ inline void staged_commit() {
#if defined(QSA_GPU_CUDA)
  sm80::cp_async_commit();
#endif
}

template <int kPending>
__device__ inline void staged_wait() {
#if defined(QSA_GPU_CUDA)
  sm80::cp_async_wait<kPending>();
#endif
}

// The slot being filled. On NVIDIA its shared-window address, converted
// once per slot (cp.async takes a 32-bit one; a conversion per piece would
// double the copy loop); elsewhere a pointer.
struct SlotTarget {
#if defined(QSA_GPU_CUDA)
  uint32_t base;
  __device__ explicit SlotTarget(uint4* slot) : base(sm80::smem_addr(slot)) {}
  // slot[vector] = *src, or 16 zero bytes when !valid (src must still be a
  // valid address; nothing is read from it).
  __device__ void copy(int vector, const uint4* src, bool valid) const {
    sm80::cp_async16(base + static_cast<uint32_t>(sizeof(uint4)) * static_cast<uint32_t>(vector), src, valid);
  }
#else
  uint4* base;
  __device__ explicit SlotTarget(uint4* slot) : base(slot) {}
  __device__ void copy(int vector, const uint4* src, bool valid) const {
    base[vector] = valid ? *src : make_uint4(0u, 0u, 0u, 0u);
  }
#endif
};

// A 64-bit pointer as lane `src` holds it.
__device__ inline const uint4* read_lane_ptr(const uint4* p, int src) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  const uint64_t lo = wave_read_lane(static_cast<uint32_t>(u), src);
  const uint64_t hi = wave_read_lane(static_cast<uint32_t>(static_cast<uint64_t>(u) >> 32), src);
  return reinterpret_cast<const uint4*>(static_cast<uintptr_t>(lo | (hi << 32)));
}

// Where a piece comes from: `address` is always a valid global address;
// when !valid the piece is zero-filled and nothing is read.
struct PieceSource {
  const uint4* address;
  bool valid;
};

// Whether `pred` holds in every lane of the wave.
__device__ inline bool wave_all(bool pred) { return wave_ballot(pred) == wave_ballot(true); }

// One wave's staging of a row's keys, and this lane's share of every
// slot's copy: pieces p = lane + warpSize · i (i < vectors) of the slot's
// warpSize · vectors, piece p being vector p mod vectors of key p div
// vectors, so consecutive lanes copy consecutive 16-byte pieces. The
// mapping is the same for every slot; the constructor's divisions run once.
struct StagedWave {
  int vectors;            // 16-byte vectors per key
  int stride;             // staged_stride(vectors)
  int slot_size;          // vectors per slot: warpSize · stride
  uint4* ring;            // this wave's kStagedSlots slots
  const uint4* fallback;  // any valid global address (the source of zero-filled pieces)
  int key0, vec0;         // this lane's first piece
  int dkey, dvec;         // from one of its pieces to the next

  __device__ StagedWave(int vectors_per_key, uint4* wave_ring, const void* cache)
      : vectors(vectors_per_key),
        stride(staged_stride(vectors_per_key)),
        slot_size(warpSize * staged_stride(vectors_per_key)),
        ring(wave_ring),
        fallback(static_cast<const uint4*>(cache)),
        key0(lane_id() / vectors_per_key),
        vec0(lane_id() % vectors_per_key),
        dkey(warpSize / vectors_per_key),
        dvec(warpSize % vectors_per_key) {}

  __device__ uint4* slot(int64_t stage) const { return ring + static_cast<int>(stage % kStagedSlots) * slot_size; }

  // Copies this lane's pieces into `slot` from source(p, key, vec), piece
  // p's PieceSource. kCarry: vectors does not divide warpSize, so a lane's
  // pieces change vector too (the common key sizes divide it, and then the
  // loop is one add per index).
  template <bool kCarry, class Source>
  __device__ void copy_pieces(uint4* slot, const Source& source) const {
    const SlotTarget dst(slot);
    const int dat = dkey * stride + dvec;
    int p = lane_id();
    int key = key0;
    int vec = vec0;
    int at = key0 * stride + vec0;  // the piece's vector in the slot
    for (int i = 0; i < vectors; ++i) {
      const PieceSource src = source(p, key, vec);
      dst.copy(at, src.address, src.valid);
      p += warpSize;
      key += dkey;
      at += dat;
      if constexpr (kCarry) {
        vec += dvec;
        if (vec >= vectors) {
          vec -= vectors;
          ++key;
          at += stride - vectors;
        }
      }
    }
  }

  template <bool kCarry>
  __device__ void issue_pieces(uint4* slot, const uint4* own) const {
    const uint4* first = read_lane_ptr(own, 0);
    if (wave_all(own != nullptr && own == first + lane_id() * vectors)) {  // uniform over the wave
      copy_pieces<kCarry>(slot, [first](int p, int, int) { return PieceSource{first + p, true}; });
    } else {
      copy_pieces<kCarry>(slot, [own, this](int, int key, int vec) {
        const uint4* src = read_lane_ptr(own, key);
        return src != nullptr ? PieceSource{src + vec, true} : PieceSource{fallback, false};
      });
    }
  }

  // Starts copying the slot of `stage`, whose key l starts at lane l's
  // `own` (nullptr: out of range or unmapped, zero-filled). Most slots lie
  // in one mapped page below V, i.e. their keys are consecutive cache rows:
  // then piece p sits p vectors past the first key and needs no shuffle.
  __device__ void issue(int64_t stage, const uint4* own) const {
    if (dvec == 0) {
      issue_pieces<false>(slot(stage), own);
    } else {
      issue_pieces<true>(slot(stage), own);
    }
  }
};

// Row t's blocks this wave scores: stages first + i · step + [0, warpSize)
// below `visible`; lane l scores block first + i · step + l.
struct StagedRun {
  int64_t first;
  int64_t step;
  int32_t visible;
  __device__ int64_t stages() const { return first < visible ? (visible - first + step - 1) / step : 0; }
  __device__ int64_t block(int64_t stage) const { return first + stage * step + lane_id(); }
};

// This lane's key of `stage` in the cache (as the slot's source), or
// nullptr when the block is past V or its page is unmapped / out of range.
template <class Code>
__device__ const uint4* staged_source(const Code* keys, const PagedKeys& g, const StagedRun& run, int64_t stage) {
  const int64_t b = run.block(stage);
  const int64_t row = b < run.visible ? paged_row(g, static_cast<int32_t>(b)) : -1;
  return row >= 0 ? reinterpret_cast<const uint4*>(keys + row * g.dim) : nullptr;
}

// Scores this wave's stages of the row (every lane of the wave, converged:
// shuffles and wave barriers). A block past V is not written; an unmapped
// one scores NaN (the zero-filled codes' result is dropped).
template <CodeKind kKind, class Code, class Decoder>
__device__ void score_staged_run(const float* q_s, const Code* keys, const PagedKeys& g, int heads, float scale,
                                 const StagedRun& run, const StagedWave& w, const Decoder& decode, float* scores) {
  const int64_t stages = run.stages();
  // mapped[j]: whether this lane's key of stage i + j has a source (kept in
  // registers: the array is shifted, never indexed at run time).
  bool mapped[kStagedSlots];
#pragma unroll
  for (int j = 0; j < kStagedSlots - 1; ++j) {
    const uint4* src = j < stages ? staged_source(keys, g, run, j) : nullptr;
    if (j < stages) w.issue(j, src);
    staged_commit();
    mapped[j] = src != nullptr;
  }
  const float nan = float_from_bits(kQuietNanBits);
  for (int64_t i = 0; i < stages; ++i) {
    const int64_t next = i + kStagedSlots - 1;
    const uint4* src = next < stages ? staged_source(keys, g, run, next) : nullptr;
    if (next < stages) w.issue(next, src);  // uniform over the wave
    staged_commit();
    mapped[kStagedSlots - 1] = src != nullptr;
    staged_wait<kStagedSlots - 1>();  // this lane's copies of stage i have landed
    wave_barrier();                   // and every lane's
    const uint4* const k[1] = {w.slot(i) + lane_id() * w.stride};
    float s[1];
    score_vectors<kKind, 1>(q_s, k, heads, g.dim, scale, decode, s);
    const int64_t b = run.block(i);
    if (b < run.visible) scores[b] = mapped[0] ? s[0] : nan;
    wave_barrier();  // the slot is read before the next iteration refills it
#pragma unroll
    for (int j = 0; j + 1 < kStagedSlots; ++j) mapped[j] = mapped[j + 1];
  }
  staged_wait<0>();  // no copy outlives the block (the trailing groups are empty)
}

}  // namespace qsa::gpu::select_detail
