#include "kernels/matmul.h"

#include <algorithm>
#include <cstddef>

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/column_sums.h"
#include "kernels/dispatch.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/matmul.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, WeightLayout layout) {
  ZDP_KERNEL_TO_V4(matmul_forward, out, inp, weight, bias, N, C, OC, layout);
  ZDP_CHECK(N > 0 && C > 0 && OC > 0, "matmul_forward: bad shape N={} C={} OC={}", N, C, OC);
  T beta = 0;
  if (bias != nullptr) {
    // Start every row from the bias and let the GEMM add onto it (beta = 1): one pass over out.
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) std::copy(bias, bias + OC, out + static_cast<ptrdiff_t>(n) * OC);
    beta = 1;
  }
  // [in, out] weights: out = inp·W with no transposes; [out, in]: inp·Wᵀ.
  const bool out_in = layout == WeightLayout::kOutIn;
  detail::gemm(false, out_in, N, OC, C, T(1), inp, C, weight, out_in ? C : OC, beta, out, OC);
}

template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N, int C, int OC,
                     WeightLayout layout, WeightGrad dw_mode) {
  ZDP_CHECK(N > 0 && C > 0 && OC > 0, "matmul_backward: bad shape N={} C={} OC={}", N, C, OC);
  const T dw_beta = dw_mode == WeightGrad::kWrite ? T(0) : T(1);
  if (layout == WeightLayout::kOutIn) {
    if (dinp != nullptr) detail::gemm(false, false, N, C, OC, T(1), dout, OC, weight, C, T(0), dinp, C);
    detail::gemm(true, false, OC, C, N, T(1), dout, OC, inp, C, dw_beta, dweight, C);
  } else {
    if (dinp != nullptr) detail::gemm(false, true, N, C, OC, T(1), dout, OC, weight, OC, T(0), dinp, C);
    detail::gemm(true, false, C, OC, N, T(1), inp, C, dout, OC, dw_beta, dweight, OC);
  }
  if (dbias != nullptr) bias_backward(dbias, dout, N, OC);
}

template <class T>
void bias_backward(T* dbias, const T* dout, int N, int OC) {
  ZDP_KERNEL_TO_V4(bias_backward, dbias, dout, N, OC);
  using Acc = T (*)[detail::kColumnBlock];
#pragma omp parallel
  detail::sum_columns_in_row_order<1, T>(N, OC, {dbias}, [&](int n, int c0, int width, Acc acc) {
    const T* d = dout + static_cast<ptrdiff_t>(n) * OC + c0;
    T* db = acc[0];
#pragma omp simd
    for (int c = 0; c < width; ++c) db[c] += d[c];
  });
}

template <class T>
void matmul_nt_forward(T* out, const T* inp, const T* wte, int N, int C, int V) {
  // (the name in parentheses: this copy's matmul_forward, not the public one argument-dependent lookup
  // would find too)
  (matmul_forward)(out, inp, wte, static_cast<const T*>(nullptr), N, C, V, WeightLayout::kOutIn);
}

template <class T>
void matmul_nt_backward(T* dinp, T* dwte, const T* dout, const T* inp, const T* wte, int N, int C,
                        int V) {
  (matmul_backward)(dinp, dwte, static_cast<T*>(nullptr), dout, inp, wte, N, C, V, WeightLayout::kOutIn,
                    WeightGrad::kAdd);
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int, int, WeightLayout);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int, int, int,
                                      WeightLayout);
template void matmul_backward<float>(float*, float*, float*, const float*, const float*, const float*, int, int, int,
                                     WeightLayout, WeightGrad);
template void matmul_backward<double>(double*, double*, double*, const double*, const double*, const double*, int, int,
                                      int, WeightLayout, WeightGrad);
template void bias_backward<float>(float*, const float*, int, int);
template void bias_backward<double>(double*, const double*, int, int);
template void matmul_nt_forward<float>(float*, const float*, const float*, int, int, int);
template void matmul_nt_forward<double>(double*, const double*, const double*, int, int, int);
template void matmul_nt_backward<float>(float*, float*, const float*, const float*, const float*, int,
                                        int, int);
template void matmul_nt_backward<double>(double*, double*, const double*, const double*, const double*,
                                         int, int, int);

#endif  // ZDP_KERNEL_PASS
