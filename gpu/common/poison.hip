#include "gpu/common/device_api.hpp"
#include "gpu/common/poison.hpp"

namespace qsa::gpu {

namespace {
__global__ void poison_kernel(uint32_t* dst, size_t n, uint32_t pattern) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = pattern;
}
}  // namespace

void poison_words(uint32_t* dst, size_t n, uint32_t pattern) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
  poison_kernel<<<blocks, 256>>>(dst, n, pattern);
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::gpu
