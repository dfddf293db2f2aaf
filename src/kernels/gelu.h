// GELU with the tanh approximation (GPT-2's "gelu_new"), s = sqrt(2/π):
//   forward:  u = s·(x + 0.044715·x³) ;  out = ½·x·(1 + tanh u)
//   backward: dinp += dout·(½·(1 + tanh u) + ½·x·(1 − tanh² u)·s·(1 + 3·0.044715·x²))
#pragma once

#include <cstddef>

namespace zerodp::kernels {

template <class T>
void gelu_forward(T* out, const T* inp, size_t n);

// Accumulates into dinp (which must not alias dout).
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

}  // namespace zerodp::kernels
