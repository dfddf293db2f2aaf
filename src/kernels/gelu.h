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

// The MLP's GELU backward fused with the bias gradient of the linear layer before it (whose output
// `pre` [N,OC] the GELU read), one pass over the rows instead of two:
//   dpre = gelu'(pre)·dout ;  dbias[c] += Σ_r dpre[r,c]
// The sum runs in bias_backward's order (each column over the rows in order), so the
// result has the bits of gelu_backward followed by bias_backward. dpre may alias dout. Threads split
// the columns in ranges of whole kGeluColumnBlock's.
inline constexpr int kGeluColumnBlock = 64;
template <class T>
void gelu_bias_backward(T* dpre, T* dbias, const T* pre, const T* dout, int N, int OC);
// 16-bit compute (A = bf16 or fp16): dpre16 = round(gelu'(pre)·dout), the next GEMMs' operand, and
// dbias += the unrounded sums (round_and_bias_backward's): the fp32 dpre is never stored.
template <class A>
void gelu_round_bias_backward(A* dpre16, float* dbias, const A* pre, const float* dout, int N, int OC);

}  // namespace zerodp::kernels
