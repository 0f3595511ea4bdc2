#include <cfloat>

#include "gpu/common/bf16.hpp"
#include "gpu/common/device_buffer.hpp"
#include "gpu/common/device_limits.hpp"
#include "gpu/common/exact_math.hpp"
#include "gpu/common/selftest.hpp"
#include "gpu/common/wave.hpp"
#include "reference/core/rng.hpp"

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

// Spins until *release is nonzero or `cycles` of this multiprocessor's
// clock have passed (a bound, so that a test that forgets to release it
// cannot hang). Its shared memory only keeps other blocks off the SM.
__global__ void hold_kernel(const int* release, long long cycles) {
  const long long start = clock64();
  while (*static_cast<const volatile int*>(release) == 0 && clock64() - start < cycles) {
  }
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

#if defined(QSA_GPU_CUDA)

// A thread's tallies, added to counts = [checked, mismatched, smallest bad
// input + 1 (0: none)] once at its end.
struct Tally {
  unsigned long long checked = 0, mismatched = 0, first_bad = ~0ull;
  __device__ void note(bool match, uint64_t input) {
    ++checked;
    if (!match) {
      ++mismatched;
      first_bad = min(first_bad, static_cast<unsigned long long>(input));
    }
  }
  __device__ void flush(unsigned long long* counts) const {
    if (checked != 0) atomicAdd(&counts[0], checked);
    if (mismatched != 0) {
      atomicAdd(&counts[1], mismatched);
      atomicMin(&counts[2], first_bad + 1);
    }
  }
};

__device__ uint64_t thread_index() { return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ uint64_t thread_count() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }

__global__ void exact_rcp_kernel(unsigned long long* counts) {
  constexpr uint32_t kFirst = 0x3f800000u, kEnd = 0x7e800000u;  // the floats of [1, 2^126)
  Tally t;
  for (uint64_t i = thread_index(); i < kEnd - kFirst; i += thread_count()) {
    const float d = bits_float(kFirst + static_cast<uint32_t>(i));
    bool ok = true;
    const float r = exact::rcp_rn(d, ok);
    t.note(ok && float_bits(r) == float_bits(1.0f / d), kFirst + i);
  }
  if (thread_index() == 0) {  // outside the range the flag must drop: 2^126, inf, NaN, 0.5
    const uint32_t outside[4] = {kEnd, 0x7f800000u, 0x7fc00000u, 0x3f000000u};
    for (uint32_t bits : outside) {
      bool ok = true;
      exact::rcp_rn(bits_float(bits), ok);
      t.note(!ok, bits);
    }
  }
  t.flush(counts);
}

__global__ void exact_bf16_kernel(unsigned long long* counts) {
  Tally t;
  for (uint64_t i = thread_index(); i < (1ull << 32); i += thread_count()) {
    const uint32_t bits = static_cast<uint32_t>(i);
    const float x = bits_float(bits);
    const uint32_t exponent = (bits >> 23) & 0xffu, magnitude = bits & 0x7fffffffu;
    const bool zero_normal_inf = magnitude == 0u || (exponent >= 1u && exponent <= 254u) || magnitude == 0x7f800000u;
    const bool accepted = exact::bf16_rn_exact(x);
    const uint32_t r = exact::bf16x2_rn(x, -x);
    t.note(accepted == zero_normal_inf &&
               (!accepted || ((r & 0xffffu) == float_to_bf16_bits(x) && (r >> 16) == float_to_bf16_bits(-x))),
           bits);
  }
  t.flush(counts);
}

__global__ void exact_div_kernel(uint64_t seed, uint64_t n, unsigned long long* counts) {
  Tally t;
  for (uint64_t i = thread_index(); i < n; i += thread_count()) {
    const uint64_t z = splitmix_finalise(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    const float v = bits_float(static_cast<uint32_t>(z));
    const float l = bits_float((static_cast<uint32_t>(z >> 32) & 0x7fffffffu) % 0x7f800000u);  // [0, inf)
    if (!isfinite(v) || !(l > 0.0f)) continue;
    bool ok = true;
    const float q = exact::div_rn(v, 1.0 / static_cast<double>(l), ok);
    if (ok) t.note(float_bits(q) == float_bits(v / l), i);
  }
  t.flush(counts);
}

template <class Launch>
ExactMathCounts run_exact_check(Launch launch, hipStream_t stream) {
  DeviceBuffer<unsigned long long> d(3);
  QSA_GPU_CHECK(hipMemsetAsync(d.get(), 0, 3 * sizeof(unsigned long long), stream));
  launch(d.get());
  QSA_GPU_CHECK_LAUNCH();
  unsigned long long h[3] = {};
  QSA_GPU_CHECK(hipMemcpyAsync(h, d.get(), sizeof h, hipMemcpyDeviceToHost, stream));
  QSA_GPU_CHECK(hipStreamSynchronize(stream));
  ExactMathCounts c;
  c.checked = h[0];
  c.mismatched = h[1];
  c.first_bad = h[2] == 0 ? 0 : h[2] - 1;
  return c;
}

#endif  // QSA_GPU_CUDA

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

void hold_multiprocessors(int blocks, const int* release, double seconds, hipStream_t stream) {
  if (blocks < 1) return;
  const DeviceLimits& d = device_limits();
  const size_t bytes = one_block_per_multiprocessor_shared(d);  // as the spread kernel's blocks
  resident_blocks(reinterpret_cast<const void*>(hold_kernel), d.wave, bytes);  // opts in to the shared memory
  int khz = 0;  // the peak clock: the bound is at least `seconds`
  QSA_GPU_CHECK(hipDeviceGetAttribute(&khz, hipDeviceAttributeClockRate, d.device));
  const long long cycles = static_cast<long long>(seconds * 1000.0 * khz);
  hold_kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(d.wave), bytes, stream>>>(release, cycles);
  QSA_GPU_CHECK_LAUNCH();
}

void wave_probe_on_device(int threads, int* out, hipStream_t stream) {
  QSA_GPU_CHECK(hipMemsetAsync(out, 0, 5 * sizeof(int), stream));
  wave_probe_kernel<<<1, static_cast<unsigned>(threads), 0, stream>>>(out);
  QSA_GPU_CHECK_LAUNCH();
}

#if defined(QSA_GPU_CUDA)

bool exact_math_checks_exist() { return true; }

ExactMathCounts check_exact_rcp_on_device(hipStream_t stream) {
  return run_exact_check([&](unsigned long long* d) { exact_rcp_kernel<<<4096, 256, 0, stream>>>(d); }, stream);
}

ExactMathCounts check_exact_bf16_on_device(hipStream_t stream) {
  return run_exact_check([&](unsigned long long* d) { exact_bf16_kernel<<<8192, 256, 0, stream>>>(d); }, stream);
}

ExactMathCounts check_exact_div_on_device(uint64_t seed, uint64_t n, hipStream_t stream) {
  return run_exact_check([&](unsigned long long* d) { exact_div_kernel<<<4096, 256, 0, stream>>>(seed, n, d); },
                         stream);
}

#else

bool exact_math_checks_exist() { return false; }
ExactMathCounts check_exact_rcp_on_device(hipStream_t) { return {}; }
ExactMathCounts check_exact_bf16_on_device(hipStream_t) { return {}; }
ExactMathCounts check_exact_div_on_device(uint64_t, uint64_t, hipStream_t) { return {}; }

#endif  // QSA_GPU_CUDA

}  // namespace qsa::gpu
