#include "core/stochastic_round.h"

#include "core/dtype.h"

namespace zerodp {

void round_bf16_stochastic(const float* x, uint16_t* out, size_t n, uint64_t stream, uint64_t first) {
  for (size_t e = 0; e < n; ++e) out[e] = bf16_bits_stochastic(float_bits(x[e]), mix64(stream ^ (first + e)));
}

}  // namespace zerodp
