#include "core/rng.h"

#include <cmath>

namespace zerodp {

namespace {

// Philox4x32's multipliers and Weyl key increments (the golden ratio and sqrt(3) - 1, in 32 bits).
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

// One round, an S-box of two 32x32->64 multiplications and a permutation:
//   (hi0, lo0) = M0·x0,  (hi1, lo1) = M1·x2
//   x' = (hi1 ^ x1 ^ k0,  lo1,  hi0 ^ x3 ^ k1,  lo0)
inline PhiloxCounter philox_round(const PhiloxCounter& x, const PhiloxKey& k) {
  const uint64_t p0 = static_cast<uint64_t>(kMul0) * x[0];
  const uint64_t p1 = static_cast<uint64_t>(kMul1) * x[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k[1], static_cast<uint32_t>(p0)};
}

inline PhiloxCounter counter_of(uint64_t index, uint64_t stream) {
  return {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(stream),
          static_cast<uint32_t>(stream >> 32)};
}

inline PhiloxKey key_of(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

inline double box_muller(uint32_t w0, uint32_t w1) {
  constexpr double kTwoPow32Inv = 1.0 / 4294967296.0;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double u1 = (static_cast<double>(w0) + 0.5) * kTwoPow32Inv;  // never 0: log is finite
  const double u2 = static_cast<double>(w1) * kTwoPow32Inv;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

}  // namespace

// Ten rounds; the key advances by the Weyl constants between rounds (not after the last).
PhiloxCounter philox4x32(PhiloxCounter ctr, PhiloxKey key, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    ctr = philox_round(ctr, key);
  }
  return ctr;
}

PhiloxCounter CounterRng::bits(uint64_t i) const { return philox4x32(counter_of(i, stream_), key_of(seed_)); }

float CounterRng::uniform(uint64_t i) const {
  return static_cast<float>(bits(i)[0] >> 8) * (1.0f / 16777216.0f);
}

float CounterRng::normal(uint64_t i) const {
  const PhiloxCounter w = bits(i);
  return static_cast<float>(box_muller(w[0], w[1]));
}

void CounterRng::fill_uniform(uint64_t first, size_t n, float* dst) const {
#pragma omp parallel for schedule(static) if (n > (1u << 15))
  for (size_t k = 0; k < n; ++k) dst[k] = uniform(first + k);
}

void CounterRng::fill_normal(uint64_t first, size_t n, float mean, float std, float* dst) const {
#pragma omp parallel for schedule(static) if (n > (1u << 14))
  for (size_t k = 0; k < n; ++k) {
    // In double and rounded once, so a value never depends on how the loop was split or vectorised.
    const PhiloxCounter w = bits(first + k);
    dst[k] =
        static_cast<float>(static_cast<double>(mean) + static_cast<double>(std) * box_muller(w[0], w[1]));
  }
}

}  // namespace zerodp
