// 64-bit hashing for the data layer: the shuffled order's Feistel rounds (loader.cpp) and the
// tokenizer's flat tables (bpe_tables.h). The shuffle's order depends on mix64, so changing it
// changes which tokens a shuffled run reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace zerodp::data {

// splitmix64's finaliser: a bijective 64-bit mix whose every output bit depends on every input bit.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// A hash of n bytes at p: eight bytes a round, then the tail, then mix64.
inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
  }
  return mix64(h);
}

}  // namespace zerodp::data
