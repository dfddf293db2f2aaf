#include "kernels/gelu.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "kernels/dispatch.h"
#include "kernels/half.h"
#include "kernels/vec_math.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/gelu.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/π)
constexpr double kCubic = 0.044715;
}  // namespace

using detail::load;
using detail::put;

template <class T>
inline T gelu_value(T x) {
  const T s = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
  const T th = detail::fast_tanh(s * (x + a * x * x * x));
  return T(0.5) * x * (T(1) + th);
}

// ∂gelu(x)/∂x, the one expression every backward below uses (so that fusing a pass keeps the bits).
template <class T>
inline T gelu_grad(T x) {
  const T s = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
  const T th = detail::fast_tanh(s * (x + a * x * x * x));
  const T sech2 = T(1) - th * th;
  return T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * s * (T(1) + T(3) * a * x * x);
}

template <class T>
constexpr bool k16 = std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

// A 16-bit input has only 65536 values, so the forward's rounded output and the backward's fp32
// derivative are table lookups, the tables filled once from gelu_value and gelu_grad (a lookup gives
// what computing would). 128 + 256 KiB, of which a layer's activations touch a few hot lines; the
// formula costs some thirty vector operations an element, the lookup one load.
template <class A>
struct Gelu16Tables {
  std::vector<A> value;
  std::vector<float> grad;
  Gelu16Tables() : value(size_t{1} << 16), grad(size_t{1} << 16) {
    for (uint32_t b = 0; b < (uint32_t{1} << 16); ++b) {
      A x;
      x.bits = static_cast<uint16_t>(b);
      put(value[b], gelu_value(load(x)));
      grad[b] = gelu_grad(load(x));
    }
  }
};
template <class A>
const Gelu16Tables<A>& gelu16_tables() {
  static const Gelu16Tables<A> tables;
  return tables;
}

template <class I, class O>
void gelu_forward(O* out, const I* inp, size_t n) {
  ZDP_KERNEL_TO_V4(gelu_forward, out, inp, n);
  using T = detail::acc_t<O>;
  const T s = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
  if constexpr (k16<I> && std::is_same_v<I, O>) {
    const O* value = gelu16_tables<I>().value.data();
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < count; ++i) out[i] = value[inp[i].bits];
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) {
    const T x = load(inp[i]);
    const T th = detail::fast_tanh(s * (x + a * x * x * x));
    put(out[i], T(0.5) * x * (T(1) + th));
  }
}

template <class T, class I>
void gelu_backward(T* dinp, const I* inp, const T* dout, size_t n) {
  ZDP_KERNEL_TO_V4(gelu_backward, dinp, inp, dout, n);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
  if constexpr (k16<I>) {
    const float* grad = gelu16_tables<I>().grad.data();
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < count; ++i) dinp[i] = grad[inp[i].bits] * dout[i];
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) dinp[i] = gelu_grad(load(inp[i])) * dout[i];
}

// Each thread takes a range of whole columns and walks the rows in order over it, a row's range at a
// time (contiguous: the 64-column blocks of bias_backward, walked down a [N, 4C] array, stride a page
// per row, and cost more than the pass they save). Each column is still summed over the rows in
// order, bias_backward's (and round_and_bias_backward's) order, so the bias gradient has their bits.
inline int gelu_column_range(int OC) {
  const int threads = std::max(1, omp_get_max_threads());
  const int per_thread = (OC + threads - 1) / threads;
  return std::min(OC, (per_thread + kGeluColumnBlock - 1) / kGeluColumnBlock * kGeluColumnBlock);
}

template <class T>
void gelu_bias_backward(T* dpre, T* dbias, const T* pre, const T* dout, int N, int OC) {
  ZDP_KERNEL_TO_V4(gelu_bias_backward, dpre, dbias, pre, dout, N, OC);
  const int range = gelu_column_range(OC), ranges = (OC + range - 1) / range;
#pragma omp parallel for schedule(static)
  for (int k = 0; k < ranges; ++k) {
    const int c0 = k * range, width = std::min(OC - c0, range);
    std::vector<T> acc(static_cast<size_t>(width), T(0));
    T* sum = acc.data();
    for (int r = 0; r < N; ++r) {
      const ptrdiff_t row = static_cast<ptrdiff_t>(r) * OC + c0;
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        const T d = gelu_grad(pre[row + c]) * dout[row + c];
        dpre[row + c] = d;
        sum[c] += d;
      }
    }
    for (int c = 0; c < width; ++c) dbias[c0 + c] += sum[c];
  }
}

template <class A>
void gelu_round_bias_backward(A* dpre16, float* dbias, const A* pre, const float* dout, int N, int OC) {
  ZDP_KERNEL_TO_V4(gelu_round_bias_backward, dpre16, dbias, pre, dout, N, OC);
  const float* grad = gelu16_tables<A>().grad.data();
  const int range = gelu_column_range(OC), ranges = (OC + range - 1) / range;
#pragma omp parallel for schedule(static)
  for (int k = 0; k < ranges; ++k) {
    const int c0 = k * range, width = std::min(OC - c0, range);
    std::vector<float> acc(2 * static_cast<size_t>(width), 0.0f);
    float* sum = acc.data();
    float* g = sum + width;
    for (int r = 0; r < N; ++r) {
      const ptrdiff_t row = static_cast<ptrdiff_t>(r) * OC + c0;
      for (int c = 0; c < width; ++c) g[c] = grad[pre[row + c].bits];  // scalar loads, not gathers
#pragma omp simd
      for (int c = 0; c < width; ++c) {
        const float d = g[c] * dout[row + c];
        sum[c] += d;
        put(dpre16[row + c], d);
      }
    }
    for (int c = 0; c < width; ++c) dbias[c0 + c] += sum[c];
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
template void gelu_bias_backward(float*, float*, const float*, const float*, int, int);
template void gelu_bias_backward(double*, double*, const double*, const double*, int, int);
template void gelu_round_bias_backward(bf16*, float*, const bf16*, const float*, int, int);
template void gelu_round_bias_backward(fp16*, float*, const fp16*, const float*, int, int);

#endif  // ZDP_KERNEL_PASS
