#include "reference/core/rng.hpp"

#include <cmath>

namespace qsa {

uint64_t stream_id(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t counter_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  // Two finaliser rounds over distinct odd-multiplier mixes keep nearby
  // (seed, stream, index) triples decorrelated.
  uint64_t key = splitmix_finalise(seed * 0x9e3779b97f4a7c15ULL + stream);
  return splitmix_finalise(key ^ (index * 0xd1b54a32d192ed03ULL + 0x632be59bd9b4e019ULL));
}

double counter_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<double>(counter_bits(seed, stream, index) >> 11) * 0x1.0p-53;
}

double counter_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  // 1 - u lies in (0, 1], so the log is finite.
  double u1 = 1.0 - counter_uniform(seed, stream, 2 * index);
  double u2 = counter_uniform(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

}  // namespace qsa
