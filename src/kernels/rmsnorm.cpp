#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/column_sums.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/rmsnorm.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

using detail::load;
using detail::put;

template <class T, class W, class O>
void rmsnorm_forward(O* out, T* rstd, const T* inp, const W* weight, int N, int C, double eps) {
  ZDP_KERNEL_TO_V4(rmsnorm_forward, out, rstd, inp, weight, N, C, eps);
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
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const W* weight, const T* rstd, int N, int C) {
  ZDP_KERNEL_TO_V4(rmsnorm_backward, dinp, dweight, dout, inp, weight, rstd, N, C);
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

template <class P, class T>
void head_rmsnorm_forward(P* x, P* saved, T* rstd, const P* weight, int N, int heads, int D, int64_t stride,
                          double eps) {
  ZDP_KERNEL_TO_V4(head_rmsnorm_forward, x, saved, rstd, weight, N, heads, D, stride, eps);
  ZDP_CHECK(N > 0 && heads > 0 && D > 0 && stride >= int64_t{heads} * D && eps >= 0,
            "head_rmsnorm_forward: bad shape N={} heads={} D={} stride={} or eps {}", N, heads, D, stride, eps);
  const T inv_d = T(1) / T(D);
  const T e = static_cast<T>(eps);
  const ptrdiff_t rows = static_cast<ptrdiff_t>(N) * heads;
#pragma omp parallel for schedule(static)
  for (ptrdiff_t r = 0; r < rows; ++r) {
    P* head = x + (r / heads) * stride + (r % heads) * D;
    P* keep = saved + r * D;
    T sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int d = 0; d < D; ++d) {
      keep[d] = head[d];
      sq += load(head[d]) * load(head[d]);
    }
    const T s = T(1) / std::sqrt(sq * inv_d + e);
#pragma omp simd
    for (int d = 0; d < D; ++d) put(head[d], (load(keep[d]) * s) * load(weight[d]));
    rstd[r] = s;
  }
}

template <class P, class T>
void head_rmsnorm_backward(T* dx, T* dweight, const P* saved, const T* rstd, const P* weight, int N, int heads, int D,
                           int64_t stride) {
  ZDP_KERNEL_TO_V4(head_rmsnorm_backward, dx, dweight, saved, rstd, weight, N, heads, D, stride);
  ZDP_CHECK(N > 0 && heads > 0 && D > 0 && stride >= int64_t{heads} * D,
            "head_rmsnorm_backward: bad shape N={} heads={} D={} stride={}", N, heads, D, stride);
  const T inv_d = T(1) / T(D);
  const int rows = N * heads;
  auto grad = [&](ptrdiff_t r) { return dx + (r / heads) * stride + (r % heads) * D; };
#pragma omp parallel
  {
    // dweight first, from the gradient of the normed heads, before it is replaced in place.
    using Acc = T (*)[detail::kColumnBlock];
    detail::sum_columns_in_row_order<1, T>(rows, D, {dweight}, [&](int r, int c0, int width, Acc acc) {
      const P* x = saved + static_cast<ptrdiff_t>(r) * D + c0;
      const T* d = grad(r) + c0;
      const T s = rstd[r];
      T* dw = acc[0];
#pragma omp simd
      for (int c = 0; c < width; ++c) dw[c] += d[c] * (load(x[c]) * s);
    });
    // Then each head: dx = rstd·(dn − n·mean(dn·n)), dn = dy·w, n = x·rstd.
#pragma omp for schedule(static)
    for (int r = 0; r < rows; ++r) {
      T* d = grad(r);
      const P* x = saved + static_cast<ptrdiff_t>(r) * D;
      const T s = rstd[r];
      T dn_n_sum = 0;
#pragma omp simd reduction(+ : dn_n_sum)
      for (int c = 0; c < D; ++c) dn_n_sum += d[c] * load(weight[c]) * (load(x[c]) * s);
      const T dn_n_mean = dn_n_sum * inv_d;
#pragma omp simd
      for (int c = 0; c < D; ++c) d[c] = s * (d[c] * load(weight[c]) - (load(x[c]) * s) * dn_n_mean);
    }
  }
}

template void head_rmsnorm_forward(float*, float*, float*, const float*, int, int, int, int64_t, double);
template void head_rmsnorm_forward(double*, double*, double*, const double*, int, int, int, int64_t, double);
template void head_rmsnorm_forward(bf16*, bf16*, float*, const bf16*, int, int, int, int64_t, double);
template void head_rmsnorm_forward(fp16*, fp16*, float*, const fp16*, int, int, int, int64_t, double);
template void head_rmsnorm_backward(float*, float*, const float*, const float*, const float*, int, int, int, int64_t);
template void head_rmsnorm_backward(double*, double*, const double*, const double*, const double*, int, int, int,
                                    int64_t);
template void head_rmsnorm_backward(float*, float*, const bf16*, const float*, const bf16*, int, int, int, int64_t);
template void head_rmsnorm_backward(float*, float*, const fp16*, const float*, const fp16*, int, int, int, int64_t);

template void rmsnorm_forward(float*, float*, const float*, const float*, int, int, double);
template void rmsnorm_forward(double*, double*, const double*, const double*, int, int, double);
template void rmsnorm_forward(bf16*, float*, const float*, const bf16*, int, int, double);
template void rmsnorm_forward(fp16*, float*, const float*, const fp16*, int, int, double);
template void rmsnorm_backward(float*, float*, const float*, const float*, const float*, const float*, int, int);
template void rmsnorm_backward(double*, double*, const double*, const double*, const double*, const double*, int,
                               int);
template void rmsnorm_backward(float*, float*, const float*, const float*, const bf16*, const float*, int, int);
template void rmsnorm_backward(float*, float*, const float*, const float*, const fp16*, const float*, int, int);

#endif  // ZDP_KERNEL_PASS
