// Device side of bench_fill.hpp.
#include <cstdint>

#include "gpu/common/device_api.hpp"
#include "harness/bench/gpu/bench_fill.hpp"

namespace qsa::bench {

namespace {

// The finaliser and index mix of qsa::counter_bits (reference/core/rng.cpp).
__device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill_kernel(T* dst, size_t count, const T* table, uint64_t key) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint64_t h = mix64(key ^ (static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL));
    dst[i] = table[h >> (64 - kFillTableBits)];
  }
}

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 16384;  // grid-stride beyond this

}  // namespace

void launch_fill_from_table(void* dst, size_t count, size_t element_bytes, const void* table, uint64_t key,
                            hipStream_t stream) {
  if (count == 0) return;
  const size_t want = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < kMaxBlocks ? want : kMaxBlocks);
  if (element_bytes == 1) {
    fill_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(dst), count,
                                                          static_cast<const uint8_t*>(table), key);
  } else if (element_bytes == 2) {
    fill_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(dst), count,
                                                           static_cast<const uint16_t*>(table), key);
  } else if (element_bytes == 4) {
    fill_kernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(dst), count,
                                                           static_cast<const uint32_t*>(table), key);
  } else {
    throw InternalError("launch_fill_from_table: elements of " + std::to_string(element_bytes) + " bytes");
  }
  QSA_GPU_CHECK_LAUNCH();
}

}  // namespace qsa::bench
