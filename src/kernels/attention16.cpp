// 16-bit causal self-attention (kernels/attention.h): attention.cpp's blocking and math, with the
// products through gemm16 and the softmax in fp32.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/gemm16.h"
#include "kernels/half.h"
#include "kernels/vec_math.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/attention16.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {

using detail::load;
using detail::put;

template <class A>
const uint16_t* bits(const A* p) {
  return reinterpret_cast<const uint16_t*>(p);
}

constexpr size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// One (b, h) task's working memory: scores or dP [rb, T] fp32, dS [rb, T] in A, output [rb, hs] fp32.
struct HeadScratch {
  size_t scores, ds, out, total;
  HeadScratch(int T_, int hs) {
    const size_t rb = static_cast<size_t>(std::min(T_, kAttentionRowBlock));
    scores = round64(rb * T_ * sizeof(float));
    ds = round64(rb * T_ * 2);
    out = round64(rb * hs * sizeof(float));
    total = scores + ds + out;
  }
};

// The shape of one call and where each head's slices start (attention.h's qkv layout).
struct Heads {
  int T, NH, NKV, group, hs, W, R;  // W: a row of out; R: a row of qkv
  float scale;                      // 1/sqrt(hs)
  HeadScratch scratch;
  Heads(const char* what, const AttentionShape& s)
      : T(s.T), NH(s.heads), NKV(s.kv_heads), group(s.kv_heads > 0 ? s.heads / s.kv_heads : 0), hs(s.head_size),
        W(s.heads * s.head_size), R((s.heads + 2 * s.kv_heads) * s.head_size),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs > 0 ? hs : 1)))),
        scratch(s.T, s.head_size > 0 ? s.head_size : 1) {
    ZDP_CHECK(s.B > 0 && s.T > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_size > 0 && s.heads % s.kv_heads == 0,
              "{}: bad shape B={} T={} heads={} kv_heads={} head_size={} (kv_heads must divide heads)", what, s.B,
              s.T, s.heads, s.kv_heads, s.head_size);
  }
  ptrdiff_t row0(int b) const { return static_cast<ptrdiff_t>(b) * T * R; }
  ptrdiff_t q(int b, int h) const { return row0(b) + h * hs; }
  ptrdiff_t k(int b, int g) const { return row0(b) + W + g * hs; }
  ptrdiff_t v(int b, int g) const { return row0(b) + W + NKV * hs + g * hs; }
  ptrdiff_t out(int b, int h) const { return static_cast<ptrdiff_t>(b) * T * W + h * hs; }
  ptrdiff_t att(int b, int h) const { return (static_cast<ptrdiff_t>(b) * NH + h) * T * T; }
  char* scratch_of(void* base, int task) const { return static_cast<char*>(base) + task * scratch.total; }
};

}  // namespace

size_t attention16_scratch_bytes(const AttentionShape& s) {
  // The forward's tasks are the (b, query head) pairs, the backward's fewer.
  return static_cast<size_t>(s.B) * s.heads * HeadScratch(s.T, s.head_size).total;
}

template <class A>
void attention16_forward(A* out, A* att, const A* qkv, void* scratch, const AttentionShape& shape) {
  ZDP_KERNEL_TO_V4(attention16_forward, out, att, qkv, scratch, shape);
  const Heads H("attention16_forward", shape);
  const int T_ = H.T, hs = H.hs, R = H.R, W = H.W, NH = H.NH;
  const DType t16 = dtype_of<A>;
  const float scale = H.scale;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < shape.B * NH; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const A* q = qkv + H.q(b, h);
    const A* k = qkv + H.k(b, h / H.group);
    const A* v = qkv + H.v(b, h / H.group);
    A* p = att + H.att(b, h);
    A* o = out + H.out(b, h);
    char* mine = H.scratch_of(scratch, bh);
    float* s = reinterpret_cast<float*>(mine);
    float* o32 = reinterpret_cast<float*>(mine + H.scratch.scores + H.scratch.ds);
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      // S[r0:r1, 0:r1] = scale · Q[r0:r1]·K[0:r1]ᵀ (fp32), then P = causal softmax, rounded into att.
      gemm16(t16, false, true, rows, r1, hs, scale, bits(q + static_cast<ptrdiff_t>(r0) * R), R, bits(k), R, 0.0f,
             s, r1);
      for (int t = r0; t < r1; ++t) {
        // Over the keys [lo, t] the row attends to (lo > 0 with a sliding window or packed sequences),
        // zeros elsewhere.
        const int lo = shape.first_key(b, t), n = t + 1 - lo;
        float* row = s + static_cast<ptrdiff_t>(t - r0) * r1 + lo;
        const float m = detail::row_max(row, n);
        const float inv = static_cast<float>(1.0 / detail::exp_shifted(row, row, n, m));
        A* prow = p + static_cast<ptrdiff_t>(t) * T_;
        std::fill(prow, prow + lo, A{0});
#pragma omp simd
        for (int j = 0; j < n; ++j) put(prow[lo + j], row[j] * inv);
        std::fill(prow + t + 1, prow + T_, A{0});
      }
      // O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
      gemm16(t16, false, false, rows, hs, r1, 1.0f, bits(p + static_cast<ptrdiff_t>(r0) * T_), T_, bits(v), R, 0.0f,
             o32, hs);
      for (int r = 0; r < rows; ++r) {
        A* orow = o + static_cast<ptrdiff_t>(r0 + r) * W;
        const float* src = o32 + static_cast<ptrdiff_t>(r) * hs;
#pragma omp simd
        for (int c = 0; c < hs; ++c) put(orow[c], src[c]);
      }
    }
  }
}

template <class A>
void attention16_backward(float* dqkv, void* scratch, const A* dout16, const A* qkv, const A* att,
                          const AttentionShape& shape) {
  ZDP_KERNEL_TO_V4(attention16_backward, dqkv, scratch, dout16, qkv, att, shape);
  const Heads H("attention16_backward", shape);
  const int T_ = H.T, hs = H.hs, R = H.R, W = H.W, NKV = H.NKV;
  const DType t16 = dtype_of<A>;
  const float scale = H.scale;
  // One task per (b, key/value head): its query heads add into the same dK, dV in order.
#pragma omp parallel for schedule(static)
  for (int bg = 0; bg < shape.B * NKV; ++bg) {
    const int b = bg / NKV, g = bg % NKV;
    const A* k = qkv + H.k(b, g);
    const A* v = qkv + H.v(b, g);
    float* dk = dqkv + H.k(b, g);
    float* dv = dqkv + H.v(b, g);
    char* mine = H.scratch_of(scratch, bg);
    float* dp = reinterpret_cast<float*>(mine);
    A* ds = reinterpret_cast<A*>(mine + H.scratch.scores);
    for (int h = g * H.group; h < (g + 1) * H.group; ++h) {
      const A* q = qkv + H.q(b, h);
      float* dq = dqkv + H.q(b, h);
      const A* p = att + H.att(b, h);
      const A* dout_h = dout16 + H.out(b, h);
      for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
        const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
        const A* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
        const A* do_rows = dout_h + static_cast<ptrdiff_t>(r0) * W;
        // dP = dO[r0:r1]·V[0:r1]ᵀ ;  dV[0:r1] += P[r0:r1, 0:r1]ᵀ·dO[r0:r1]
        gemm16(t16, false, true, rows, r1, hs, 1.0f, bits(do_rows), W, bits(v), R, 0.0f, dp, r1);
        gemm16(t16, true, false, r1, hs, rows, 1.0f, bits(p_rows), T_, bits(do_rows), W, 1.0f, dv, R);
        // dS = P∘(dP − rowsum(P∘dP))·scale, rounded; zero right of the diagonal.
        for (int t = r0; t < r1; ++t) {
          const A* p_row = p + static_cast<ptrdiff_t>(t) * T_;
          const float* dp_row = dp + static_cast<ptrdiff_t>(t - r0) * r1;
          A* ds_row = ds + static_cast<ptrdiff_t>(t - r0) * r1;
          float dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int j = 0; j <= t; ++j) dot += load(p_row[j]) * dp_row[j];
#pragma omp simd
          for (int j = 0; j <= t; ++j) put(ds_row[j], load(p_row[j]) * (dp_row[j] - dot) * scale);
          std::fill(ds_row + t + 1, ds_row + r1, A{0});
        }
        // dQ[r0:r1] += dS·K[0:r1] ;  dK[0:r1] += dSᵀ·Q[r0:r1]
        gemm16(t16, false, false, rows, hs, r1, 1.0f, bits(ds), r1, bits(k), R, 1.0f,
               dq + static_cast<ptrdiff_t>(r0) * R, R);
        gemm16(t16, true, false, r1, hs, rows, 1.0f, bits(ds), r1, bits(q + static_cast<ptrdiff_t>(r0) * R), R, 1.0f,
               dk, R);
      }
    }
  }
}

template void attention16_forward(bf16*, bf16*, const bf16*, void*, const AttentionShape&);
template void attention16_forward(fp16*, fp16*, const fp16*, void*, const AttentionShape&);
template void attention16_backward(float*, void*, const bf16*, const bf16*, const bf16*, const AttentionShape&);
template void attention16_backward(float*, void*, const fp16*, const fp16*, const fp16*, const AttentionShape&);

#endif  // ZDP_KERNEL_PASS
