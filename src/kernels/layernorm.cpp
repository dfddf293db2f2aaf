#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/column_sums.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/layernorm.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

using detail::load;
using detail::put;

template <class T, class W, class O>
void layernorm_forward(O* out, T* mean, T* rstd, const T* inp, const W* weight, const W* bias, int N, int C) {
  ZDP_KERNEL_TO_V4(layernorm_forward, out, mean, rstd, inp, weight, bias, N, C);
  ZDP_CHECK(N > 0 && C > 0, "layernorm_forward: bad shape N={} C={}", N, C);
  const T inv_c = T(1) / T(C);
  const T eps = static_cast<T>(kLayerNormEps);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const T* x = inp + static_cast<ptrdiff_t>(n) * C;
    O* o = out + static_cast<ptrdiff_t>(n) * C;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    const T m = sum * inv_c;
    // Two passes over the row (it is in cache): the variance of x − μ, free of the cancellation
    // that E[x²] − μ² suffers when |μ| is large next to the spread.
    T var = 0;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < C; ++c) {
      const T d = x[c] - m;
      var += d * d;
    }
    const T s = T(1) / std::sqrt(var * inv_c + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) put(o[c], (x[c] - m) * s * load(weight[c]) + load(bias[c]));
    mean[n] = m;
    rstd[n] = s;
  }
}

template <class T, class W>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const W* weight, const T* mean,
                        const T* rstd, int N, int C) {
  ZDP_KERNEL_TO_V4(layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  ZDP_CHECK(N > 0 && C > 0, "layernorm_backward: bad shape N={} C={}", N, C);
  const T inv_c = T(1) / T(C);
#pragma omp parallel
  {
    // dinp: row by row, each row needs two reductions of its own.
#pragma omp for schedule(static) nowait
    for (int n = 0; n < N; ++n) {
      const T* x = inp + static_cast<ptrdiff_t>(n) * C;
      const T* d = dout + static_cast<ptrdiff_t>(n) * C;
      T* dx = dinp + static_cast<ptrdiff_t>(n) * C;
      const T m = mean[n], s = rstd[n];
      T dn_sum = 0, dn_n_sum = 0;
#pragma omp simd reduction(+ : dn_sum, dn_n_sum)
      for (int c = 0; c < C; ++c) {
        const T dn = d[c] * load(weight[c]);
        dn_sum += dn;
        dn_n_sum += dn * (x[c] - m) * s;
      }
      const T dn_mean = dn_sum * inv_c, dn_n_mean = dn_n_sum * inv_c;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const T norm = (x[c] - m) * s;
        dx[c] += s * (d[c] * load(weight[c]) - dn_mean - norm * dn_n_mean);
      }
    }
    // dweight, dbias: column blocks, rows in order.
    using Acc = T (*)[detail::kColumnBlock];
    detail::sum_columns_in_row_order<2, T>(N, C, {dweight, dbias}, [&](int n, int c0, int width, Acc acc) {
      const T* x = inp + static_cast<ptrdiff_t>(n) * C + c0;
      const T* d = dout + static_cast<ptrdiff_t>(n) * C + c0;
      const T m = mean[n], s = rstd[n];
      T* dw = acc[0];
      T* db = acc[1];
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        dw[c] += d[c] * ((x[c] - m) * s);
        db[c] += d[c];
      }
    });
  }
}

template void layernorm_forward(float*, float*, float*, const float*, const float*, const float*, int, int);
template void layernorm_forward(double*, double*, double*, const double*, const double*, const double*, int,
                                int);
template void layernorm_forward(bf16*, float*, float*, const float*, const bf16*, const bf16*, int, int);
template void layernorm_forward(fp16*, float*, float*, const float*, const fp16*, const fp16*, int, int);
template void layernorm_backward(float*, float*, float*, const float*, const float*, const float*, const float*,
                                 const float*, int, int);
template void layernorm_backward(double*, double*, double*, const double*, const double*, const double*,
                                 const double*, const double*, int, int);
template void layernorm_backward(float*, float*, float*, const float*, const float*, const bf16*, const float*,
                                 const float*, int, int);
template void layernorm_backward(float*, float*, float*, const float*, const float*, const fp16*, const float*,
                                 const float*, int, int);

#endif  // ZDP_KERNEL_PASS
