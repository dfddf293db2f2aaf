#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/dispatch.h"
#include "kernels/vec_math.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
namespace zerodp::kernels {
AttentionShape AttentionShape::mha(int B, int T, int C, int NH) {
  ZDP_CHECK(NH > 0 && C > 0 && C % NH == 0, "attention: bad shape C={} NH={} (C must be a multiple of NH)", C, NH);
  return {B, T, NH, NH, C / NH};
}
}  // namespace zerodp::kernels

#define ZDP_KERNEL_SOURCE "kernels/attention.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {

void check_shape(const char* what, const AttentionShape& s) {
  ZDP_CHECK(s.B > 0 && s.T > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_size > 0 && s.heads % s.kv_heads == 0,
            "{}: bad shape B={} T={} heads={} kv_heads={} head_size={} (kv_heads must divide heads)", what, s.B,
            s.T, s.heads, s.kv_heads, s.head_size);
}

// Row t of P from row t of S, in place: softmax over the keys [lo, t] the row attends to (lo > 0 with
// a sliding window or packed sequences), zeros elsewhere.
template <class T>
ZDP_KERNEL_INLINE void causal_softmax_row(T* row, int lo, int t, int T_) {
  std::fill(row, row + lo, T(0));
  T* keys = row + lo;
  const int n = t + 1 - lo;
  const T m = detail::row_max(keys, n);
  const T inv = static_cast<T>(1.0 / detail::exp_shifted(keys, keys, n, m));
#pragma omp simd
  for (int j = 0; j < n; ++j) keys[j] *= inv;
  std::fill(row + t + 1, row + T_, T(0));
}

// Where a head's columns start in a row of qkv, and the rows' widths.
struct Columns {
  int hs, q_width, kv_width, row;
  explicit Columns(const AttentionShape& s)
      : hs(s.head_size), q_width(s.heads * s.head_size), kv_width(s.kv_heads * s.head_size),
        row(q_width + 2 * kv_width) {}
  int q(int h) const { return h * hs; }
  int k(int g) const { return q_width + g * hs; }
  int v(int g) const { return q_width + kv_width + g * hs; }
};

}  // namespace

size_t attention_scratch_elems(const AttentionShape& s) {
  return static_cast<size_t>(s.B) * s.kv_heads * std::min(s.T, kAttentionRowBlock) * s.T;
}

template <class T>
void attention_forward(T* out, T* att, const T* qkv, const AttentionShape& shape) {
  ZDP_KERNEL_TO_V4(attention_forward, out, att, qkv, shape);
  check_shape("attention_forward", shape);
  const int T_ = shape.T, NH = shape.heads, group = shape.heads / shape.kv_heads;
  const Columns col(shape);
  const int hs = col.hs, R = col.row, W = col.q_width;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  // One (b, h) per task; BLAS runs single-threaded inside the parallel region.
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < shape.B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const T* row0 = qkv + static_cast<ptrdiff_t>(b) * T_ * R;
    const T* q = row0 + col.q(h);
    const T* k = row0 + col.k(h / group);
    const T* v = row0 + col.v(h / group);
    T* p = att + static_cast<ptrdiff_t>(bh) * T_ * T_;
    T* o = out + static_cast<ptrdiff_t>(b) * T_ * W + col.q(h);
    // Rows r0..r1 attend to keys 0..r1 only: the blocks right of the diagonal block are skipped.
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      T* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
      // S[r0:r1, 0:r1] = scale · Q[r0:r1]·K[0:r1]ᵀ
      detail::gemm(false, true, rows, r1, hs, scale, q + static_cast<ptrdiff_t>(r0) * R, R, k, R, T(0), p_rows,
                   T_);
      for (int t = r0; t < r1; ++t)
        causal_softmax_row(p + static_cast<ptrdiff_t>(t) * T_, shape.first_key(b, t), t, T_);
      // O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
      detail::gemm(false, false, rows, hs, r1, T(1), p_rows, T_, v, R, T(0), o + static_cast<ptrdiff_t>(r0) * W, W);
    }
  }
}

template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, const AttentionShape& shape) {
  ZDP_KERNEL_TO_V4(attention_backward, dqkv, scratch, dout, qkv, att, shape);
  check_shape("attention_backward", shape);
  const int T_ = shape.T, NH = shape.heads, NKV = shape.kv_heads, group = NH / NKV;
  const Columns col(shape);
  const int hs = col.hs, R = col.row, W = col.q_width;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hs)));
  const ptrdiff_t scratch_per_task = static_cast<ptrdiff_t>(std::min(T_, kAttentionRowBlock)) * T_;
#pragma omp parallel for schedule(static)
  for (int bg = 0; bg < shape.B * NKV; ++bg) {
    const int b = bg / NKV, g = bg % NKV;
    const ptrdiff_t row0 = static_cast<ptrdiff_t>(b) * T_ * R;
    const T* k = qkv + row0 + col.k(g);
    const T* v = qkv + row0 + col.v(g);
    T* dk = dqkv + row0 + col.k(g);
    T* dv = dqkv + row0 + col.v(g);
    T* ds = scratch + bg * scratch_per_task;  // [rows, r1] of the current block, leading dim r1
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const T* q = qkv + row0 + col.q(h);
      T* dq = dqkv + row0 + col.q(h);
      const T* p = att + (static_cast<ptrdiff_t>(b) * NH + h) * T_ * T_;
      const T* dout_h = dout + static_cast<ptrdiff_t>(b) * T_ * W + col.q(h);
      for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
        const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
        const T* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
        const T* do_rows = dout_h + static_cast<ptrdiff_t>(r0) * W;
        // dP = dO[r0:r1]·V[0:r1]ᵀ
        detail::gemm(false, true, rows, r1, hs, T(1), do_rows, W, v, R, T(0), ds, r1);
        // dV[0:r1] += P[r0:r1, 0:r1]ᵀ·dO[r0:r1]
        detail::gemm(true, false, r1, hs, rows, T(1), p_rows, T_, do_rows, W, T(1), dv, R);
        // dS = P∘(dP − rowsum(P∘dP))·scale, in place; zero right of the diagonal (and, with a sliding
        // window, left of it, where P is 0).
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
        detail::gemm(false, false, rows, hs, r1, T(1), ds, r1, k, R, T(1), dq + static_cast<ptrdiff_t>(r0) * R, R);
        // dK[0:r1] += dSᵀ·Q[r0:r1]
        detail::gemm(true, false, r1, hs, rows, T(1), ds, r1, q + static_cast<ptrdiff_t>(r0) * R, R, T(1), dk, R);
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, const AttentionShape&);
template void attention_forward<double>(double*, double*, const double*, const AttentionShape&);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*,
                                        const AttentionShape&);
template void attention_backward<double>(double*, double*, const double*, const double*, const double*,
                                         const AttentionShape&);

#endif  // ZDP_KERNEL_PASS
