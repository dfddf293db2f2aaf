// GELU with the tanh approximation (GPT-2's "gelu_new"), s = sqrt(2/π):
//   forward:  u = s·(x + 0.044715·x³) ;  out = ½·x·(1 + tanh u)
//   backward: dinp = dout·(½·(1 + tanh u) + ½·x·(1 − tanh² u)·s·(1 + 3·0.044715·x²))
#pragma once

#include <cstddef>

namespace zerodp::kernels {

// out and inp may be 16-bit (bf16, fp16: computed in float, rounded once).
template <class I, class O>
void gelu_forward(O* out, const I* inp, size_t n);

// Writes dinp (which may alias dout: each element is read before it is written); inp may be 16-bit.
template <class T, class I>
void gelu_backward(T* dinp, const I* inp, const T* dout, size_t n);

}  // namespace zerodp::kernels
