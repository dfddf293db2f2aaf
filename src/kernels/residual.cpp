#include "kernels/residual.h"

#include <cstddef>

#include "kernels/dispatch.h"

namespace zerodp::kernels {

template <class T>
ZDP_KERNEL_CLONES
void residual_forward(T* out, const T* a, const T* b, size_t n) {
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

template <class T>
ZDP_KERNEL_CLONES
void residual_backward(T* da, T* db, const T* dout, size_t n) {
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

}  // namespace zerodp::kernels
