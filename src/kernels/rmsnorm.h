// RMSNorm over each row of C values (Llama's, as transformers' LlamaRMSNorm computes it: statistics in
// fp32 whatever the compute dtype, no mean subtracted, no bias).
//   forward:  rstd = 1/sqrt(mean(x²) + eps), n = x·rstd, out = n·w
//   backward: dn = dout·w ;  dx += rstd·(dn − n·mean(dn·n)) ;  dw += Σ_rows dout·n
#pragma once

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

}  // namespace zerodp::kernels
