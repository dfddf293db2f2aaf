// RMSNorm over each row of C values (Llama's, as transformers' LlamaRMSNorm computes it: statistics in
// fp32 whatever the compute dtype, no mean subtracted, no bias).
//   forward:  rstd = 1/sqrt(mean(x²) + eps), n = x·rstd, out = n·w
//   backward: dn = dout·w ;  dx += rstd·(dn − n·mean(dn·n)) ;  dw += Σ_rows dout·n
#pragma once

#include <cstdint>

namespace zerodp::kernels {

// inp, out [N,C]; weight [C]; saves rstd [N] for the backward pass. T is the type of the input and
// the statistic (float or double); the weight W and the output O may be 16-bit (16-bit compute), and
// then everything is computed in float and out is rounded once.
template <class T, class W, class O>
void rmsnorm_forward(O* out, T* rstd, const T* inp, const W* weight, int N, int C, double eps);

// Accumulates into dinp [N,C] and dweight [C]. dweight is summed over rows in row order by the thread
// that owns each column: bitwise the same for any number of threads.
template <class T, class W>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const W* weight, const T* rstd, int N,
                      int C);

// RMSNorm over each head (Qwen 3's q_norm and k_norm, one weight [D] for all the heads it norms):
// `heads` heads of D values at the start of each of N rows `stride` apart (the query or the key heads
// of qkv), normed in place. The heads' values are first saved into `saved` [N, heads·D] (what the
// backward reads), and rstd [N·heads] kept. P is the compute type (float, double, or 16-bit with T =
// float: computed in float, rounded once); T the statistics'.
template <class P, class T>
void head_rmsnorm_forward(P* x, P* saved, T* rstd, const P* weight, int N, int heads, int D, int64_t stride,
                          double eps);

// Its backward, in place on dx (x's layout): the gradient of the normed heads becomes the gradient of
// the heads before the norm (written); dweight [D] accumulated, summed over the N·heads rows in row
// order by the thread that owns each column.
template <class P, class T>
void head_rmsnorm_backward(T* dx, T* dweight, const P* saved, const T* rstd, const P* weight, int N, int heads, int D,
                           int64_t stride);

}  // namespace zerodp::kernels
