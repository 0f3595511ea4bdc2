// Counter-based random numbers. Every value is a pure function of
// (seed, stream, index), so tensors can be filled in parallel, in any order,
// with the same result on every machine and standard library. A stream is
// derived from a tensor's name, giving each tensor its own sequence.
#pragma once

#include <cstdint>
#include <string_view>

namespace qsa {

// Device compilers see the finaliser below as host-and-device code, so GPU
// test kernels draw their counter-based bits with the reference's mixer.
#if defined(__CUDACC__) || defined(__HIPCC__)
#define QSA_RNG_HD __host__ __device__
#else
#define QSA_RNG_HD
#endif

// SplitMix64's finaliser: a bijection of 64-bit words whose outputs look
// independent for neighbouring inputs.
QSA_RNG_HD constexpr uint64_t splitmix_finalise(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a of the name: a stable stream id for "tensor names".
uint64_t stream_id(std::string_view name);

// 64 random bits for (seed, stream, index); SplitMix64-style finaliser over a
// mix of the three.
uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t index);

// Uniform in [0, 1) with 53 random bits.
double counter_uniform(uint64_t seed, uint64_t stream, uint64_t index);

// Standard normal by Box-Muller over two uniforms drawn at 2*index and
// 2*index+1 of the stream.
double counter_normal(uint64_t seed, uint64_t stream, uint64_t index);

// Convenience over a named stream.
class CounterRng {
 public:
  CounterRng(uint64_t seed, std::string_view name) : seed_(seed), stream_(stream_id(name)) {}
  double uniform(uint64_t i) const { return counter_uniform(seed_, stream_, i); }
  double normal(uint64_t i) const { return counter_normal(seed_, stream_, i); }
  uint64_t bits(uint64_t i) const { return counter_bits(seed_, stream_, i); }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace qsa
