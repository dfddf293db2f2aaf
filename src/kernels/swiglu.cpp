#include "kernels/swiglu.h"

#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"
#include "kernels/vec_math.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/swiglu.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

using detail::fast_exp;
using detail::load;
using detail::put;

template <class X, class O>
void swiglu_forward(O* out, const X* inp, int N, int I) {
  ZDP_KERNEL_TO_V4(swiglu_forward, out, inp, N, I);
  ZDP_CHECK(N > 0 && I > 0, "swiglu_forward: bad shape N={} I={}", N, I);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const X* g = inp + static_cast<ptrdiff_t>(n) * 2 * I;
    const X* u = g + I;
    O* o = out + static_cast<ptrdiff_t>(n) * I;
#pragma omp simd
    for (int i = 0; i < I; ++i) {
      using F = decltype(load(g[i]));
      const F x = load(g[i]);
      const F sig = F(1) / (F(1) + fast_exp(-x));
      put(o[i], x * sig * load(u[i]));
    }
  }
}

template <class X, class T>
void swiglu_backward(T* dinp, const T* dout, const X* inp, int N, int I) {
  ZDP_KERNEL_TO_V4(swiglu_backward, dinp, dout, inp, N, I);
  ZDP_CHECK(N > 0 && I > 0, "swiglu_backward: bad shape N={} I={}", N, I);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const X* g = inp + static_cast<ptrdiff_t>(n) * 2 * I;
    const X* u = g + I;
    const T* d = dout + static_cast<ptrdiff_t>(n) * I;
    T* dg = dinp + static_cast<ptrdiff_t>(n) * 2 * I;
    T* du = dg + I;
#pragma omp simd
    for (int i = 0; i < I; ++i) {
      const T x = static_cast<T>(load(g[i])), up = static_cast<T>(load(u[i]));
      const T sig = T(1) / (T(1) + fast_exp(-x));
      dg[i] = d[i] * up * sig * (T(1) + x * (T(1) - sig));
      du[i] = d[i] * x * sig;
    }
  }
}

template void swiglu_forward(float*, const float*, int, int);
template void swiglu_forward(double*, const double*, int, int);
template void swiglu_forward(bf16*, const bf16*, int, int);
template void swiglu_forward(fp16*, const fp16*, int, int);
template void swiglu_backward(float*, const float*, const float*, int, int);
template void swiglu_backward(double*, const double*, const double*, int, int);
template void swiglu_backward(float*, const float*, const bf16*, int, int);
template void swiglu_backward(float*, const float*, const fp16*, int, int);

#endif  // ZDP_KERNEL_PASS
