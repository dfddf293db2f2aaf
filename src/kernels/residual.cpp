#include "kernels/residual.h"

#include <cstddef>

#include "kernels/dispatch.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/residual.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n) {
  ZDP_KERNEL_TO_V4(residual_forward, out, a, b, n);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n) {
  ZDP_KERNEL_TO_V4(residual_backward, da, db, dout, n);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

template void residual_forward<float>(float*, const float*, const float*, size_t);
template void residual_forward<double>(double*, const double*, const double*, size_t);
template void residual_backward<float>(float*, float*, const float*, size_t);
template void residual_backward<double>(double*, double*, const double*, size_t);

#endif  // ZDP_KERNEL_PASS
