// Stochastic rounding of fp32 to bf16 with counter-based randomness: element `index` of a `stream`
// draws its 16 random bits from a hash of the two, so that the result depends on what is rounded and
// where it is in the model, never on which rank or thread rounds it, nor in what order. The optimizer
// keeps its states in bf16 this way (zero/shard_optimizer.cpp): the expected value of the rounded number
// is the fp32 number, so the small steps that round-to-nearest would drop accumulate.
//
// Shared by the CPU (core/stochastic_round.cpp) and the GPU (cuda/kernels_precision.cu): the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hd.h"

namespace zerodp {

// SplitMix64's finaliser: a bijection of 64-bit words whose every output bit depends on every input bit.
ZDP_HD inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The stream of one rounding site: a run's seed, then any number of coordinates (a step, a state, a unit).
ZDP_HD inline uint64_t rounding_stream(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return mix64(mix64(mix64(mix64(seed) ^ a) ^ b) ^ c);
}

// The bf16 bits of fp32 `bits` rounded up in magnitude with probability (the dropped 16 bits)/2^16:
// `random`'s low 16 bits added below the kept ones, then truncated. NaN stays NaN (quietened), ±Inf
// stays itself; a finite value may round to ±Inf only from within one bf16 step of the largest.
ZDP_HD inline uint16_t bf16_bits_stochastic(uint32_t bits, uint64_t random) {
  if ((bits & 0x7F800000u) == 0x7F800000u)
    return static_cast<uint16_t>((bits >> 16) | ((bits & 0x007FFFFFu) != 0 ? 0x0040u : 0u));
  return static_cast<uint16_t>((bits + static_cast<uint32_t>(random & 0xFFFFu)) >> 16);
}

// n values: out[e] = bf16_bits_stochastic(x[e], mix64(stream ^ (first + e))).
void round_bf16_stochastic(const float* x, uint16_t* out, size_t n, uint64_t stream, uint64_t first);

}  // namespace zerodp
