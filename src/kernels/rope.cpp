#include "kernels/rope.h"

#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/rope.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

using detail::load;
using detail::put;

namespace {

// sign +1: the forward rotation; −1: its transpose.
template <class X>
ZDP_KERNEL_INLINE void rotate(X* out, const X* inp, const float* cos, const float* sin, const int32_t* pos, int N,
                              int T, int heads, int D, int64_t stride, float sign) {
  ZDP_CHECK(N > 0 && T > 0 && heads > 0 && D > 0 && D % 2 == 0 && stride >= int64_t{heads} * D,
            "rope: bad shape N={} T={} heads={} D={} stride={}", N, T, heads, D, stride);
  const int half = D / 2;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const ptrdiff_t at = pos ? pos[n] : n % T;
    const float* c = cos + at * half;
    const float* s = sin + at * half;
    for (int h = 0; h < heads; ++h) {
      const X* x = inp + n * stride + static_cast<ptrdiff_t>(h) * D;
      X* o = out + n * stride + static_cast<ptrdiff_t>(h) * D;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        using F = decltype(load(x[i]));
        const F a = load(x[i]), b = load(x[i + half]);
        const F ci = static_cast<F>(c[i]), si = static_cast<F>(sign * s[i]);
        put(o[i], a * ci - b * si);
        put(o[i + half], b * ci + a * si);
      }
    }
  }
}

}  // namespace

template <class X>
void rope_forward(X* out, const X* inp, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads,
                  int D, int64_t stride) {
  ZDP_KERNEL_TO_V4(rope_forward, out, inp, cos, sin, pos, N, T, heads, D, stride);
  rotate(out, inp, cos, sin, pos, N, T, heads, D, stride, 1.0f);
}

template <class X>
void rope_backward(X* dinp, const X* dout, const float* cos, const float* sin, const int32_t* pos, int N, int T,
                   int heads, int D, int64_t stride) {
  ZDP_KERNEL_TO_V4(rope_backward, dinp, dout, cos, sin, pos, N, T, heads, D, stride);
  rotate(dinp, dout, cos, sin, pos, N, T, heads, D, stride, -1.0f);
}

#define ZDP_ROPE(X)                                                                                                  \
  template void rope_forward(X*, const X*, const float*, const float*, const int32_t*, int, int, int, int, int64_t); \
  template void rope_backward(X*, const X*, const float*, const float*, const int32_t*, int, int, int, int, int64_t);
ZDP_ROPE(float)
ZDP_ROPE(double)
ZDP_ROPE(bf16)
ZDP_ROPE(fp16)
#undef ZDP_ROPE

#endif  // ZDP_KERNEL_PASS
