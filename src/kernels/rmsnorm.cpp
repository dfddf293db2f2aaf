#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/column_sums.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

namespace zerodp::kernels {

using detail::load;
using detail::put;

template <class T, class W, class O>
ZDP_KERNEL_CLONES
void rmsnorm_forward(O* out, T* rstd, const T* inp, const W* weight, int N, int C, double eps) {
  ZDP_CHECK(N > 0 && C > 0, "rmsnorm_forward: bad shape N={} C={}", N, C);
  ZDP_CHECK(eps >= 0, "rmsnorm_forward: eps {}", eps);
  const T inv_c = T(1) / T(C);
  const T e = static_cast<T>(eps);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const ptrdiff_t row = static_cast<ptrdiff_t>(n) * C;
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += inp[row + c] * inp[row + c];
    const T s = T(1) / std::sqrt(sq * inv_c + e);
#pragma omp simd
    for (int c = 0; c < C; ++c) put(out[row + c], (inp[row + c] * s) * load(weight[c]));
    rstd[n] = s;
  }
}

template <class T, class W>
ZDP_KERNEL_CLONES
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const W* weight, const T* rstd, int N,
                      int C) {
  ZDP_CHECK(N > 0 && C > 0, "rmsnorm_backward: bad shape N={} C={}", N, C);
  const T inv_c = T(1) / T(C);
#pragma omp parallel
  {
    // dinp: row by row; each row needs one reduction, mean(dn·n).
#pragma omp for schedule(static) nowait
    for (int n = 0; n < N; ++n) {
      const ptrdiff_t row = static_cast<ptrdiff_t>(n) * C;
      const T s = rstd[n];
      T dn_n_sum = 0;
#pragma omp simd reduction(+ : dn_n_sum)
      for (int c = 0; c < C; ++c) dn_n_sum += dout[row + c] * load(weight[c]) * (inp[row + c] * s);
      const T dn_n_mean = dn_n_sum * inv_c;
#pragma omp simd
      for (int c = 0; c < C; ++c)
        dinp[row + c] += s * (dout[row + c] * load(weight[c]) - (inp[row + c] * s) * dn_n_mean);
    }
    // dweight: column blocks, rows in order.
    using Acc = T (*)[detail::kColumnBlock];
    detail::sum_columns_in_row_order<1, T>(N, C, {dweight}, [&](int n, int c0, int width, Acc acc) {
      const T* x = inp + static_cast<ptrdiff_t>(n) * C + c0;
      const T* d = dout + static_cast<ptrdiff_t>(n) * C + c0;
      const T s = rstd[n];
      T* dw = acc[0];
#pragma omp simd
      for (int c = 0; c < width; ++c) dw[c] += d[c] * (x[c] * s);
    });
  }
}

template void rmsnorm_forward(float*, float*, const float*, const float*, int, int, double);
template void rmsnorm_forward(double*, double*, const double*, const double*, int, int, double);
template void rmsnorm_forward(bf16*, float*, const float*, const bf16*, int, int, double);
template void rmsnorm_forward(fp16*, float*, const float*, const fp16*, int, int, double);
template void rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*, int, int);
template void rmsnorm_backward(double*, double*, const double*, const double*, const double*, const double*, int,
                               int);
template void rmsnorm_backward(float*, float*, const float*, const float*, const bf16*, const float*, int, int);
template void rmsnorm_backward(float*, float*, const float*, const float*, const fp16*, const float*, int, int);

}  // namespace zerodp::kernels
