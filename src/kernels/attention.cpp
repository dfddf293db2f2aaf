#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/dispatch.h"
#include "kernels/vec_math.h"

namespace zerodp::kernels {

namespace {

void check_shape(const char* what, int B, int T_, int C, int NH) {
  ZDP_CHECK(B > 0 && T_ > 0 && C > 0 && NH > 0 && C % NH == 0,
            "{}: bad shape B={} T={} C={} NH={} (C must be a multiple of NH)", what, B, T_, C, NH);
}

// Row t of P from row t of S, in place: softmax over the t+1 causal entries, zeros after them.
template <class T>
ZDP_KERNEL_INLINE void causal_softmax_row(T* row, int t, int T_) {
  const int n = t + 1;
  const T m = detail::row_max(row, n);
  const T inv = static_cast<T>(1.0 / detail::exp_shifted(row, row, n, m));
#pragma omp simd
  for (int j = 0; j < n; ++j) row[j] *= inv;
  std::fill(row + n, row + T_, T(0));
}

}  // namespace

size_t attention_scratch_elems(int B, int T_, int NH) {
  return static_cast<size_t>(B) * NH * std::min(T_, kAttentionRowBlock) * T_;
}

template <class T>
ZDP_KERNEL_CLONES
void attention_forward(T* out, T* att, const T* qkv, int B, int T_, int C, int NH) {
  check_shape("attention_forward", B, T_, C, NH);
  const int hs = C / NH, C3 = 3 * C;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  // One (b, h) per task; BLAS runs single-threaded inside the parallel region.
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const T* q = qkv + static_cast<ptrdiff_t>(b) * T_ * C3 + h * hs;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* p = att + static_cast<ptrdiff_t>(bh) * T_ * T_;
    T* o = out + static_cast<ptrdiff_t>(b) * T_ * C + h * hs;
    // Rows r0..r1 attend to keys 0..r1 only: the blocks right of the diagonal block are skipped.
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      T* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
      // S[r0:r1, 0:r1] = scale · Q[r0:r1]·K[0:r1]ᵀ
      detail::gemm(false, true, rows, r1, hs, scale, q + static_cast<ptrdiff_t>(r0) * C3, C3, k, C3,
                   T(0), p_rows, T_);
      for (int t = r0; t < r1; ++t) causal_softmax_row(p + static_cast<ptrdiff_t>(t) * T_, t, T_);
      // O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
      detail::gemm(false, false, rows, hs, r1, T(1), p_rows, T_, v, C3, T(0),
                   o + static_cast<ptrdiff_t>(r0) * C, C);
    }
  }
}

template <class T>
ZDP_KERNEL_CLONES
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int T_,
                        int C, int NH) {
  check_shape("attention_backward", B, T_, C, NH);
  const int hs = C / NH, C3 = 3 * C;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  const ptrdiff_t scratch_per_head = static_cast<ptrdiff_t>(std::min(T_, kAttentionRowBlock)) * T_;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const ptrdiff_t qkv_offset = static_cast<ptrdiff_t>(b) * T_ * C3 + h * hs;
    const T* q = qkv + qkv_offset;
    const T* k = q + C;
    const T* v = q + 2 * C;
    T* dq = dqkv + qkv_offset;
    T* dk = dq + C;
    T* dv = dq + 2 * C;
    const T* p = att + static_cast<ptrdiff_t>(bh) * T_ * T_;
    const T* dout_h = dout + static_cast<ptrdiff_t>(b) * T_ * C + h * hs;
    T* ds = scratch + bh * scratch_per_head;  // [rows, r1] of the current block, leading dim r1
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      const T* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
      const T* do_rows = dout_h + static_cast<ptrdiff_t>(r0) * C;
      // dP = dO[r0:r1]·V[0:r1]ᵀ
      detail::gemm(false, true, rows, r1, hs, T(1), do_rows, C, v, C3, T(0), ds, r1);
      // dV[0:r1] += P[r0:r1, 0:r1]ᵀ·dO[r0:r1]
      detail::gemm(true, false, r1, hs, rows, T(1), p_rows, T_, do_rows, C, T(1), dv, C3);
      // dS = P∘(dP − rowsum(P∘dP))·scale, in place; zero right of the diagonal.
      for (int t = r0; t < r1; ++t) {
        const T* p_row = p + static_cast<ptrdiff_t>(t) * T_;
        T* ds_row = ds + static_cast<ptrdiff_t>(t - r0) * r1;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= t; ++j) dot += p_row[j] * ds_row[j];
#pragma omp simd
        for (int j = 0; j <= t; ++j) ds_row[j] = p_row[j] * (ds_row[j] - dot) * scale;
        std::fill(ds_row + t + 1, ds_row + r1, T(0));
      }
      // dQ[r0:r1] += dS·K[0:r1]
      detail::gemm(false, false, rows, hs, r1, T(1), ds, r1, k, C3, T(1),
                   dq + static_cast<ptrdiff_t>(r0) * C3, C3);
      // dK[0:r1] += dSᵀ·Q[r0:r1]
      detail::gemm(true, false, r1, hs, rows, T(1), ds, r1, q + static_cast<ptrdiff_t>(r0) * C3, C3,
                   T(1), dk, C3);
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*, int,
                                        int, int, int);
template void attention_backward<double>(double*, double*, const double*, const double*, const double*,
                                         int, int, int, int);

}  // namespace zerodp::kernels
