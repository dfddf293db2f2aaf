// 16-bit dense layers (kernels/matmul.h): the fp32 kernels' math with gemm16 for the products.
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "core/error.h"
#include "kernels/column_sums.h"
#include "kernels/dispatch.h"
#include "kernels/gemm16.h"
#include "kernels/half.h"
#include "kernels/matmul.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/matmul16.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {

template <class A>
const uint16_t* bits(const A* p) {
  static_assert(sizeof(A) == 2);
  return reinterpret_cast<const uint16_t*>(p);
}
}  // namespace

template <class A>
void round_to(A* dst, const float* src, size_t n) {
  ZDP_KERNEL_TO_V4(round_to, dst, src, n);
  const ptrdiff_t count = static_cast<ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < count; ++i) detail::put(dst[i], src[i]);
}

// out[n,c] = O(acc[n,c] + bias[c]): the bias and the rounding to the output dtype in one pass over the
// GEMM's fp32 result (instead of filling rows with the bias for a GEMM with beta = 1, then rounding).
template <class A, class O>
void add_bias_round(O* out, const float* acc, const A* bias, int N, int OC) {
  ZDP_KERNEL_TO_V4(add_bias_round, out, acc, bias, N, OC);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* a = acc + static_cast<ptrdiff_t>(n) * OC;
    O* o = out + static_cast<ptrdiff_t>(n) * OC;
    if (bias != nullptr) {
#pragma omp simd
      for (int c = 0; c < OC; ++c) detail::put(o[c], a[c] + detail::load(bias[c]));
    } else {
#pragma omp simd
      for (int c = 0; c < OC; ++c) detail::put(o[c], a[c]);
    }
  }
}

template <class A, class O>
void matmul16_forward(O* out, const A* inp, const A* weight, const A* bias, int N, int C, int OC, float* scratch,
                      WeightLayout layout) {
  ZDP_CHECK(N > 0 && C > 0 && OC > 0, "matmul16_forward: bad shape N={} C={} OC={}", N, C, OC);
  constexpr bool to16 = !std::is_same_v<O, float>;
  float* acc = nullptr;
  if constexpr (to16) {
    ZDP_CHECK(scratch != nullptr, "matmul16_forward: a 16-bit output needs fp32 scratch");
    acc = scratch;
  } else {
    acc = out;
  }
  const bool out_in = layout == WeightLayout::kOutIn;
  gemm16(dtype_of<A>, false, out_in, N, OC, C, 1.0f, bits(inp), C, bits(weight), out_in ? C : OC, 0.0f, acc, OC);
  if (to16 || bias != nullptr) add_bias_round(out, acc, bias, N, OC);
}

// dout16 = A(dout) and dbias += the column sums of dout, in one pass over dout (by column blocks, each
// summed over the rows in order, as bias_backward does).
template <class A>
void round_and_bias_backward(A* dout16, float* dbias, const float* dout, int N, int OC) {
  ZDP_KERNEL_TO_V4(round_and_bias_backward, dout16, dbias, dout, N, OC);
  using Acc = float (*)[detail::kColumnBlock];
#pragma omp parallel
  detail::sum_columns_in_row_order<1, float>(N, OC, {dbias}, [&](int n, int c0, int width, Acc acc) {
    const float* d = dout + static_cast<ptrdiff_t>(n) * OC + c0;
    A* r = dout16 + static_cast<ptrdiff_t>(n) * OC + c0;
    float* db = acc[0];
#pragma omp simd
    for (int c = 0; c < width; ++c) {
      db[c] += d[c];
      detail::put(r[c], d[c]);
    }
  });
}

template <class A>
void matmul16_backward(float* dinp, float* dweight, float* dbias, const float* dout, A* dout16, const A* inp,
                       const A* weight, int N, int C, int OC, WeightLayout layout, WeightGrad dw_mode) {
  ZDP_CHECK(N > 0 && C > 0 && OC > 0, "matmul16_backward: bad shape N={} C={} OC={}", N, C, OC);
  if (dbias != nullptr) {
    round_and_bias_backward(dout16, dbias, dout, N, OC);
  } else {
    round_to(dout16, dout, static_cast<size_t>(N) * OC);
  }
  matmul16_backward_rounded(dinp, dweight, dout16, inp, weight, N, C, OC, layout, dw_mode);
}

template <class A>
void matmul16_backward_rounded(float* dinp, float* dweight, const A* dout16, const A* inp, const A* weight, int N,
                               int C, int OC, WeightLayout layout, WeightGrad dw_mode) {
  ZDP_CHECK(N > 0 && C > 0 && OC > 0, "matmul16_backward: bad shape N={} C={} OC={}", N, C, OC);
  const DType t = dtype_of<A>;
  const float dw_beta = dw_mode == WeightGrad::kWrite ? 0.0f : 1.0f;
  if (layout == WeightLayout::kOutIn) {
    if (dinp != nullptr) gemm16(t, false, false, N, C, OC, 1.0f, bits(dout16), OC, bits(weight), C, 0.0f, dinp, C);
    gemm16(t, true, false, OC, C, N, 1.0f, bits(dout16), OC, bits(inp), C, dw_beta, dweight, C);
  } else {
    if (dinp != nullptr) gemm16(t, false, true, N, C, OC, 1.0f, bits(dout16), OC, bits(weight), OC, 0.0f, dinp, C);
    gemm16(t, true, false, C, OC, N, 1.0f, bits(inp), C, bits(dout16), OC, dw_beta, dweight, OC);
  }
}

template <class A>
void matmul16_nt_forward(float* out, const A* inp, const A* wte, int N, int C, int V) {
  // (the name in parentheses: this copy's, not also the public one argument-dependent lookup finds)
  (matmul16_forward)(out, inp, wte, static_cast<const A*>(nullptr), N, C, V, nullptr, WeightLayout::kOutIn);
}

template <class A>
void matmul16_nt_backward(float* dinp, float* dwte, const float* dout, A* dout16, const A* inp, const A* wte,
                          int N, int C, int V) {
  (matmul16_backward)(dinp, dwte, nullptr, dout, dout16, inp, wte, N, C, V, WeightLayout::kOutIn, WeightGrad::kAdd);
}

#define ZDP_MATMUL16(A)                                                                                              \
  template void round_to(A*, const float*, size_t);                                                                  \
  template void matmul16_forward(float*, const A*, const A*, const A*, int, int, int, float*, WeightLayout);         \
  template void matmul16_forward(A*, const A*, const A*, const A*, int, int, int, float*, WeightLayout);             \
  template void matmul16_backward(float*, float*, float*, const float*, A*, const A*, const A*, int, int, int,       \
                                  WeightLayout, WeightGrad);                                                         \
  template void matmul16_backward_rounded(float*, float*, const A*, const A*, const A*, int, int, int, WeightLayout, \
                                          WeightGrad);                                                               \
  template void matmul16_nt_forward(float*, const A*, const A*, int, int, int);                                      \
  template void matmul16_nt_backward(float*, float*, const float*, A*, const A*, const A*, int, int, int);
ZDP_MATMUL16(bf16)
ZDP_MATMUL16(fp16)
#undef ZDP_MATMUL16

#endif  // ZDP_KERNEL_PASS
