// Finding NaN and Inf in fp32 data (what a checkpoint refuses to hold, on the way in and out).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace zerodp {

// The first of the n floats at p that is NaN or Inf (exponent all ones), or n. Blocks of 64 are
// tested without a branch per element, a loop the compiler vectorizes, so that a scan of data in cache
// runs at the cache's speed.
inline size_t first_nonfinite(const float* p, size_t n) {
  constexpr size_t kBlock = 64;
  constexpr uint32_t kExponent = 0x7F800000u;
  size_t at = 0;
  for (; at + kBlock <= n; at += kBlock) {
    uint32_t any = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      uint32_t bits;
      std::memcpy(&bits, p + at + i, sizeof bits);  // a plain load (a block copied out first ran at a third)
      any |= static_cast<uint32_t>((bits & kExponent) == kExponent);
    }
    if (any != 0) break;
  }
  for (; at < n; ++at)
    if (!std::isfinite(p[at])) return at;
  return n;
}

}  // namespace zerodp
