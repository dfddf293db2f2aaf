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

namespace zerodp::kernels {

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

// The shape of one call and where head (b, h)'s slices start.
struct Heads {
  int T, C, NH, hs, C3;
  float scale;  // 1/sqrt(hs)
  HeadScratch scratch;
  Heads(const char* what, int B, int T_, int C_, int NH_)
      : T(T_), C(C_), NH(NH_), hs(NH_ > 0 ? C_ / NH_ : 0), C3(3 * C_),
        scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs > 0 ? hs : 1)))), scratch(T_, hs) {
    ZDP_CHECK(B > 0 && T_ > 0 && C_ > 0 && NH_ > 0 && C_ % NH_ == 0,
              "{}: bad shape B={} T={} C={} NH={} (C must be a multiple of NH)", what, B, T_, C_, NH_);
  }
  ptrdiff_t qkv(int bh) const { return static_cast<ptrdiff_t>(bh / NH) * T * C3 + (bh % NH) * hs; }  // q; k +C, v +2C
  ptrdiff_t out(int bh) const { return static_cast<ptrdiff_t>(bh / NH) * T * C + (bh % NH) * hs; }
  ptrdiff_t att(int bh) const { return static_cast<ptrdiff_t>(bh) * T * T; }
  char* scratch_of(void* base, int bh) const { return static_cast<char*>(base) + bh * scratch.total; }
};

}  // namespace

size_t attention16_scratch_bytes(int B, int T_, int C, int NH) {
  return static_cast<size_t>(B) * NH * HeadScratch(T_, C / NH).total;
}

template <class A>
ZDP_KERNEL_CLONES
void attention16_forward(A* out, A* att, const A* qkv, void* scratch, int B, int T_, int C, int NH) {
  const Heads H("attention16_forward", B, T_, C, NH);
  const int hs = H.hs, C3 = H.C3;
  const DType t16 = dtype_of<A>;
  const float scale = H.scale;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const A* q = qkv + H.qkv(bh);
    const A* k = q + C;
    const A* v = q + 2 * C;
    A* p = att + H.att(bh);
    A* o = out + H.out(bh);
    char* mine = H.scratch_of(scratch, bh);
    float* s = reinterpret_cast<float*>(mine);
    float* o32 = reinterpret_cast<float*>(mine + H.scratch.scores + H.scratch.ds);
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      // S[r0:r1, 0:r1] = scale · Q[r0:r1]·K[0:r1]ᵀ (fp32), then P = causal softmax, rounded into att.
      gemm16(t16, false, true, rows, r1, hs, scale, bits(q + static_cast<ptrdiff_t>(r0) * C3), C3, bits(k), C3,
             0.0f, s, r1);
      for (int t = r0; t < r1; ++t) {
        float* row = s + static_cast<ptrdiff_t>(t - r0) * r1;
        const int n = t + 1;
        const float m = detail::row_max(row, n);
        const float inv = static_cast<float>(1.0 / detail::exp_shifted(row, row, n, m));
        A* prow = p + static_cast<ptrdiff_t>(t) * T_;
#pragma omp simd
        for (int j = 0; j < n; ++j) put(prow[j], row[j] * inv);
        std::fill(prow + n, prow + T_, A{0});
      }
      // O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1]
      gemm16(t16, false, false, rows, hs, r1, 1.0f, bits(p + static_cast<ptrdiff_t>(r0) * T_), T_, bits(v), C3,
             0.0f, o32, hs);
      for (int r = 0; r < rows; ++r) {
        A* orow = o + static_cast<ptrdiff_t>(r0 + r) * C;
        const float* src = o32 + static_cast<ptrdiff_t>(r) * hs;
#pragma omp simd
        for (int c = 0; c < hs; ++c) put(orow[c], src[c]);
      }
    }
  }
}

template <class A>
ZDP_KERNEL_CLONES
void attention16_backward(float* dqkv, void* scratch, const A* dout16, const A* qkv, const A* att, int B, int T_,
                          int C, int NH) {
  const Heads H("attention16_backward", B, T_, C, NH);
  const int hs = H.hs, C3 = H.C3;
  const DType t16 = dtype_of<A>;
  const float scale = H.scale;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const A* q = qkv + H.qkv(bh);
    const A* k = q + C;
    const A* v = q + 2 * C;
    float* dq = dqkv + H.qkv(bh);
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const A* p = att + H.att(bh);
    const A* dout_h = dout16 + H.out(bh);
    char* mine = H.scratch_of(scratch, bh);
    float* dp = reinterpret_cast<float*>(mine);
    A* ds = reinterpret_cast<A*>(mine + H.scratch.scores);
    for (int r0 = 0; r0 < T_; r0 += kAttentionRowBlock) {
      const int r1 = std::min(T_, r0 + kAttentionRowBlock), rows = r1 - r0;
      const A* p_rows = p + static_cast<ptrdiff_t>(r0) * T_;
      const A* do_rows = dout_h + static_cast<ptrdiff_t>(r0) * C;
      // dP = dO[r0:r1]·V[0:r1]ᵀ ;  dV[0:r1] += P[r0:r1, 0:r1]ᵀ·dO[r0:r1]
      gemm16(t16, false, true, rows, r1, hs, 1.0f, bits(do_rows), C, bits(v), C3, 0.0f, dp, r1);
      gemm16(t16, true, false, r1, hs, rows, 1.0f, bits(p_rows), T_, bits(do_rows), C, 1.0f, dv, C3);
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
      gemm16(t16, false, false, rows, hs, r1, 1.0f, bits(ds), r1, bits(k), C3, 1.0f,
             dq + static_cast<ptrdiff_t>(r0) * C3, C3);
      gemm16(t16, true, false, r1, hs, rows, 1.0f, bits(ds), r1, bits(q + static_cast<ptrdiff_t>(r0) * C3), C3,
             1.0f, dk, C3);
    }
  }
}

template void attention16_forward(bf16*, bf16*, const bf16*, void*, int, int, int, int);
template void attention16_forward(fp16*, fp16*, const fp16*, void*, int, int, int, int);
template void attention16_backward(float*, void*, const bf16*, const bf16*, const bf16*, int, int, int, int);
template void attention16_backward(float*, void*, const fp16*, const fp16*, const fp16*, int, int, int, int);

}  // namespace zerodp::kernels
