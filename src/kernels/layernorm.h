// LayerNorm over each row of C values, eps 1e-5, biased variance.
//   forward:  μ = mean(x), rstd = 1/sqrt(mean((x−μ)²) + eps), n = (x−μ)·rstd, out = n·w + b
//   backward: dn = dout·w ;  dx += rstd·(dn − mean(dn) − n·mean(dn·n))
//             dw += Σ_rows dout·n ;  db += Σ_rows dout
#pragma once

namespace zerodp::kernels {

inline constexpr double kLayerNormEps = 1e-5;

// inp, out [N,C]; weight, bias [C]; saves mean and rstd [N] for the backward pass. T is the type of
// the input and the statistics (float or double); the parameters W and the output O may be 16-bit
// (bf16, fp16: 16-bit compute), and then everything is computed in float and out is rounded once.
template <class T, class W, class O>
void layernorm_forward(O* out, T* mean, T* rstd, const T* inp, const W* weight, const W* bias, int N,
                       int C);

// Accumulates into dinp [N,C], dweight and dbias [C]. dweight/dbias are summed over rows in row
// order by the thread that owns each column: bitwise the same for any number of threads.
template <class T, class W>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const W* weight,
                        const T* mean, const T* rstd, int N, int C);

}  // namespace zerodp::kernels
