#include "kernels/gelu.h"

#include <cstddef>

#include "kernels/half.h"
#include "kernels/vec_math.h"

namespace zerodp::kernels {

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/π)
constexpr double kCubic = 0.044715;
}  // namespace

using detail::load;
using detail::put;

template <class I, class O>
void gelu_forward(O* out, const I* inp, size_t n) {
  using T = detail::acc_t<O>;
  const T s = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) {
    const T x = load(inp[i]);
    const T th = detail::fast_tanh(s * (x + a * x * x * x));
    put(out[i], T(0.5) * x * (T(1) + th));
  }
}

template <class T, class I>
void gelu_backward(T* dinp, const I* inp, const T* dout, size_t n) {
  const T s = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) {
    const T x = load(inp[i]);
    const T th = detail::fast_tanh(s * (x + a * x * x * x));
    const T sech2 = T(1) - th * th;
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * s * (T(1) + T(3) * a * x * x);
    dinp[i] = grad * dout[i];
  }
}

template void gelu_forward(float*, const float*, size_t);
template void gelu_forward(double*, const double*, size_t);
template void gelu_forward(bf16*, const bf16*, size_t);
template void gelu_forward(fp16*, const fp16*, size_t);
template void gelu_backward(float*, const float*, const float*, size_t);
template void gelu_backward(double*, const double*, const double*, size_t);
template void gelu_backward(float*, const bf16*, const float*, size_t);
template void gelu_backward(float*, const fp16*, const float*, size_t);

}  // namespace zerodp::kernels
