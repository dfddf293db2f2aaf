// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random
// Numbers: As Easy as 1, 2, 3", SC'11). A value is a pure function of (seed, stream, index), with no
// state carried from one draw to the next, so any slice of a tensor can be drawn alone, by any rank,
// and come out bit for bit as in the full tensor.
//
// Mapping: Philox key = the 64-bit seed (low word first); counter = {index low, index high,
// stream low, stream high}. Element i of a stream uses counter i and nothing else.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zerodp {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32 block with `rounds` rounds (10 is the standard, and what CounterRng uses).
PhiloxCounter philox4x32(PhiloxCounter ctr, PhiloxKey key, int rounds = 10);

// FNV-1a, 64-bit: a stable hash of a name (e.g. a tensor's), used as a stream key.
constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;  // offset basis
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

  // The four raw 32-bit words of element i.
  PhiloxCounter bits(uint64_t i) const;
  // Uniform in [0, 1): the top 24 bits of word 0 times 2^-24 (every value exact in float).
  float uniform(uint64_t i) const;
  // Standard normal by Box-Muller on words 0 and 1 of element i, computed in double:
  //   u1 = (w0 + 0.5)·2^-32 in (0, 1),  u2 = w1·2^-32,  z = sqrt(-2 ln u1) · cos(2π u2).
  float normal(uint64_t i) const;

  // dst[k] = uniform(first + k) for k < n.
  void fill_uniform(uint64_t first, size_t n, float* dst) const;
  // dst[k] = mean + std · normal(first + k) for k < n (OpenMP-parallel for large n).
  void fill_normal(uint64_t first, size_t n, float mean, float std, float* dst) const;

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace zerodp
