#include "gpu/common/bf16.hpp"
#include "gpu/common/selftest.hpp"
#include "gpu/common/wave.hpp"

namespace qsa::gpu {

namespace {

unsigned blocks_for(size_t n, unsigned threads) {
  const size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

__global__ void bf16_convert_kernel(const float* in, uint16_t* bits, float* back, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint16_t b = float_to_bf16_bits(in[i]);
    bits[i] = b;
    back[i] = bf16_to_float(b);
  }
}

__global__ void fp8_decode_kernel(const uint8_t* codes, float* out, size_t n, bool fnuz) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = fp8_e4m3_to_float(codes[i], fnuz);
}

__global__ void wave_probe_kernel(int* out) {
  const int lane = lane_id();
  const float sum = wave_sum(static_cast<float>(lane + 1));
  const float mx = wave_max(static_cast<float>(lane));
  const int mn = wave_min(100 - lane);
  if (threadIdx.x == 0) {
    out[0] = warpSize;
    out[2] = static_cast<int>(mx);
    out[3] = mn;
    out[4] = waves_per_block();
  }
  __syncthreads();
  if (lane == 0) atomicMax(&out[1], static_cast<int>(sum));
}

}  // namespace

void bf16_convert_on_device(const float* in, uint16_t* bits, float* back, size_t n, hipStream_t stream) {
  if (n == 0) return;
  bf16_convert_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(in, bits, back, n);
  QSA_GPU_CHECK_LAUNCH();
}

void fp8_decode_on_device(const uint8_t* codes, float* out, size_t n, bool fnuz, hipStream_t stream) {
  if (n == 0) return;
  fp8_decode_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(codes, out, n, fnuz);
  QSA_GPU_CHECK_LAUNCH();
}

void wave_probe_on_device(int threads, int* out, hipStream_t stream) {
  QSA_GPU_CHECK(hipMemsetAsync(out, 0, 5 * sizeof(int), stream));
  wave_probe_kernel<<<1, static_cast<unsigned>(threads), 0, stream>>>(out);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
