#include "kernels/encoder.h"

#include <algorithm>
#include <cstddef>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/encoder.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {
// dwte columns are split in blocks of this many, one block per task: each thread then owns its
// columns of every row of dwte, so repeated tokens never race and sums keep the (b, t) order.
constexpr int kColumnBlock = 64;
}  // namespace

template <class T, class W>
void encoder_forward(T* out, const int32_t* inp, const int32_t* pos, const W* wte, const W* wpe, int B, int T_, int C) {
  ZDP_KERNEL_TO_V4(encoder_forward, out, inp, pos, wte, wpe, B, T_, C);
  using detail::load;
  ZDP_CHECK(B > 0 && T_ > 0 && C > 0, "encoder_forward: bad shape B={} T={} C={}", B, T_, C);
  const ptrdiff_t rows = static_cast<ptrdiff_t>(B) * T_;
#pragma omp parallel for schedule(static)
  for (ptrdiff_t bt = 0; bt < rows; ++bt) {
    T* o = out + bt * C;
    const W* e = wte + static_cast<ptrdiff_t>(inp[bt]) * C;
    const W* p = wpe + static_cast<ptrdiff_t>(pos ? pos[bt] : bt % T_) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = load(e[c]) + load(p[c]);
  }
}

// dwte over column blocks, one block per task, rows in order within each (the row order is the
// only order of each element's sum, so the result does not depend on the number of threads).
template <class T>
void embedding_backward(T* dwte, const T* dout, const int32_t* inp, int N, int C) {
  ZDP_KERNEL_TO_V4(embedding_backward, dwte, dout, inp, N, C);
  ZDP_CHECK(N > 0 && C > 0, "embedding_backward: bad shape N={} C={}", N, C);
  const int col_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < col_blocks; ++cb) {
    const int c0 = cb * kColumnBlock, c1 = std::min(C, c0 + kColumnBlock);
    for (ptrdiff_t n = 0; n < N; ++n) {
      T* dw = dwte + static_cast<ptrdiff_t>(inp[n]) * C;
      const T* d = dout + n * C;
#pragma omp simd
      for (int c = c0; c < c1; ++c) dw[c] += d[c];
    }
  }
}

template <class T, class W>
void embedding_forward(T* out, const int32_t* inp, const W* wte, int N, int C) {
  ZDP_KERNEL_TO_V4(embedding_forward, out, inp, wte, N, C);
  using detail::load;
  ZDP_CHECK(N > 0 && C > 0, "embedding_forward: bad shape N={} C={}", N, C);
#pragma omp parallel for schedule(static)
  for (ptrdiff_t n = 0; n < N; ++n) {
    T* o = out + n * C;
    const W* e = wte + static_cast<ptrdiff_t>(inp[n]) * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = load(e[c]);
  }
}

template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* inp, const int32_t* pos, int B, int T_, int C) {
  ZDP_KERNEL_TO_V4(encoder_backward, dwte, dwpe, dout, inp, pos, B, T_, C);
  ZDP_CHECK(B > 0 && T_ > 0 && C > 0, "encoder_backward: bad shape B={} T={} C={}", B, T_, C);
  embedding_backward(dwte, dout, inp, B * T_, C);
  // Packed sequences: wpe's rows are looked up by position as wte's by token, and their gradient sums
  // in row order as dwte's (unpacked, the same order: b ascending for each t).
  if (pos) return embedding_backward(dwpe, dout, pos, B * T_, C);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T_; ++t) {
    T* dp = dwpe + static_cast<ptrdiff_t>(t) * C;
    for (int b = 0; b < B; ++b) {
      const T* d = dout + (static_cast<ptrdiff_t>(b) * T_ + t) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dp[c] += d[c];
    }
  }
}

template void encoder_forward(float*, const int32_t*, const int32_t*, const float*, const float*, int, int, int);
template void encoder_forward(double*, const int32_t*, const int32_t*, const double*, const double*, int, int, int);
template void encoder_forward(float*, const int32_t*, const int32_t*, const bf16*, const bf16*, int, int, int);
template void encoder_forward(float*, const int32_t*, const int32_t*, const fp16*, const fp16*, int, int, int);
template void encoder_backward<float>(float*, float*, const float*, const int32_t*, const int32_t*, int, int, int);
template void encoder_backward<double>(double*, double*, const double*, const int32_t*, const int32_t*, int, int, int);
template void embedding_forward(float*, const int32_t*, const float*, int, int);
template void embedding_forward(double*, const int32_t*, const double*, int, int);
template void embedding_forward(float*, const int32_t*, const bf16*, int, int);
template void embedding_forward(float*, const int32_t*, const fp16*, int, int);
template void embedding_backward<float>(float*, const float*, const int32_t*, int, int);
template void embedding_backward<double>(double*, const double*, const int32_t*, int, int);

#endif  // ZDP_KERNEL_PASS
