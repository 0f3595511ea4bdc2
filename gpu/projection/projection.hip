#include "gpu/projection/projection.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "gpu/common/bf16.hpp"

namespace qsa::gpu {

namespace {

// Tile configuration. A block computes a kTileM x kTileN tile of y, walking k
// in steps of kTileK through shared memory; its 16 x 16 threads each own a
// 4 x 4 micro-tile whose rows and columns are strided by 16, so that the
// micro-tile reads from shared memory are broadcasts (x) or 16 consecutive
// words (w), free of bank conflicts. The kernel uses no wave-level
// operation, so it is independent of the wave size.
constexpr int kTileM = 64;  // rows of x and y
constexpr int kTileN = 64;  // rows of w = columns of y
constexpr int kTileK = 32;
constexpr int kThreadsM = 16;
constexpr int kThreadsN = 16;
constexpr int kThreads = kThreadsM * kThreadsN;
constexpr int kMicroM = kTileM / kThreadsM;
constexpr int kMicroN = kTileN / kThreadsN;
// One padding word per shared row: the loader writes a warp's 32 k values of
// one matrix row down a column, at stride kTile + 1, hitting 32 banks.
constexpr int kPad = 1;
static_assert(kTileM == kTileN, "one loader serves both operands");
static_assert(kMicroM * kThreadsM == kTileM && kMicroN * kThreadsN == kTileN, "micro-tiles must cover the tile");

// Grid dimensions stay <= 65535 (CUDA's limit for y; with 256 threads also
// far below HIP's 2^32 work-items per dimension); a block walks the tiles
// beyond them in a grid-stride loop.
constexpr int64_t kMaxGridDim = 65535;

using Tile = float[kTileK][kTileM + kPad];

struct ProjArgs {
  int64_t rows;
  int in_dim;
  int out_dim;
  bool round_output;
  const uint16_t* x;  // [rows, in_dim]
  const uint16_t* w;  // [out_dim, in_dim]
};

// Stages rows [first, first + kTileM) x columns [k0, k0 + kTileK) of a
// row-major bf16 matrix with `nrows` rows of `in_dim` values as fp32,
// transposed (s[k][row]); entries outside the matrix are 0, which leaves
// every fma chain of an in-range output element unchanged.
__device__ inline void load_tile(Tile& s, const uint16_t* m, int64_t first, int64_t nrows, int in_dim,
                                 int64_t k0) {
  for (int e = static_cast<int>(threadIdx.x); e < kTileK * kTileM; e += kThreads) {
    const int r = e / kTileK;
    const int kk = e % kTileK;
    const int64_t gr = first + r;
    const int64_t gk = k0 + kk;
    s[kk][r] = gr < nrows && gk < in_dim ? bf16_to_float(m[gr * in_dim + gk]) : 0.0f;
  }
}

__device__ inline void store(float* y, int64_t i, float v, bool round_output) {
  y[i] = round_output ? round_bf16(v) : v;
}
__device__ inline void store(uint16_t* y, int64_t i, float v, bool /*round_output*/) {
  y[i] = float_to_bf16_bits(v);
}

template <class OutT>
__global__ void __launch_bounds__(kThreads) projection_kernel(ProjArgs a, OutT* y) {
  __shared__ Tile xs;
  __shared__ Tile ws;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsN;
  const int ty = static_cast<int>(threadIdx.x) / kThreadsN;
  const int64_t row_tiles = (a.rows + kTileM - 1) / kTileM;
  const int64_t col_tiles = (int64_t{a.out_dim} + kTileN - 1) / kTileN;

  // Loop bounds depend on the block index only, so every thread of a block
  // reaches the same barriers.
  for (int64_t rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
    for (int64_t ct = blockIdx.x; ct < col_tiles; ct += gridDim.x) {
      const int64_t r0 = rt * kTileM;
      const int64_t c0 = ct * kTileN;
      float acc[kMicroM][kMicroN];
#pragma unroll
      for (int i = 0; i < kMicroM; ++i)
#pragma unroll
        for (int j = 0; j < kMicroN; ++j) acc[i][j] = 0.0f;

      for (int64_t k0 = 0; k0 < a.in_dim; k0 += kTileK) {
        load_tile(xs, a.x, r0, a.rows, a.in_dim, k0);
        load_tile(ws, a.w, c0, a.out_dim, a.in_dim, k0);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTileK; ++kk) {
          float xv[kMicroM], wv[kMicroN];
#pragma unroll
          for (int i = 0; i < kMicroM; ++i) xv[i] = xs[kk][ty + i * kThreadsM];
#pragma unroll
          for (int j = 0; j < kMicroN; ++j) wv[j] = ws[kk][tx + j * kThreadsN];
          // Explicit fmaf: the exact product is added with one rounding, in
          // k order, on every compiler (no contraction choices left).
#pragma unroll
          for (int i = 0; i < kMicroM; ++i)
#pragma unroll
            for (int j = 0; j < kMicroN; ++j) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
        }
        __syncthreads();  // the next k step overwrites xs and ws
      }

#pragma unroll
      for (int i = 0; i < kMicroM; ++i) {
        const int64_t r = r0 + ty + i * kThreadsM;
        if (r >= a.rows) continue;
#pragma unroll
        for (int j = 0; j < kMicroN; ++j) {
          const int64_t c = c0 + tx + j * kThreadsN;
          if (c < a.out_dim) store(y, r * a.out_dim + c, acc[i][j], a.round_output);
        }
      }
    }
  }
}

// Returns false when there is nothing to launch (rows = 0).
bool check_launch(const ProjectionParams& p, const void* x, const void* w, const void* y) {
  if (p.rows < 0 || p.in_dim <= 0 || p.out_dim <= 0)
    throw ConfigError("gpu projection: rows = " + std::to_string(p.rows) + ", in_dim = " + std::to_string(p.in_dim) +
                      ", out_dim = " + std::to_string(p.out_dim) +
                      ": rows must be >= 0 and both dims positive");
  // Keeps rows * in_dim and rows * out_dim (the kernel's int64 offsets) far
  // from overflow.
  if (p.rows > std::numeric_limits<int32_t>::max())
    throw ConfigError("gpu projection: " + std::to_string(p.rows) + " rows do not fit one launch (at most 2^31 - 1)");
  if (p.rows == 0) return false;
  if (x == nullptr || w == nullptr || y == nullptr)
    throw InputError(std::string("gpu projection: device pointer ") + (x == nullptr ? "x" : w == nullptr ? "w" : "y") +
                     " is null");
  return true;
}

template <class OutT>
void launch(const ProjectionParams& p, const uint16_t* x, const uint16_t* w, OutT* y, hipStream_t stream) {
  if (!check_launch(p, x, w, y)) return;
  const int64_t row_tiles = (p.rows + kTileM - 1) / kTileM;
  const int64_t col_tiles = (int64_t{p.out_dim} + kTileN - 1) / kTileN;
  const dim3 grid(static_cast<unsigned>(std::min(col_tiles, kMaxGridDim)),
                  static_cast<unsigned>(std::min(row_tiles, kMaxGridDim)));
  const ProjArgs args{p.rows, p.in_dim, p.out_dim, p.round_output, x, w};
  projection_kernel<OutT><<<grid, kThreads, 0, stream>>>(args, y);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace

void launch_projection(const ProjectionParams& p, const uint16_t* x, const uint16_t* w, float* y,
                       hipStream_t stream) {
  launch(p, x, w, y, stream);
}

void launch_projection_bf16(const ProjectionParams& p, const uint16_t* x, const uint16_t* w, uint16_t* y,
                            hipStream_t stream) {
  launch(p, x, w, y, stream);
}

}  // namespace qsa::gpu
