// The Llama family's GPU kernels (cuda/kernels_norms.cu, kernels_rope.cu, kernels_swiglu.cu) as
// host-callable pieces: the index maps of their grid-stride loops and the per-element math, which the
// kernels call on the device and the CPU test suite (tests/cuda/test_llama_tiling.cpp) runs on the
// host, over every index a launch visits, against the formulas in double. Nothing here launches or
// needs a GPU. (RMSNorm's rows and column sums use elementwise_tiling.h's warp-per-row and
// ColumnLayout, as LayerNorm's do.)
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "cuda/hd.h"

namespace zerodp::cuda::llama {

// ---- RoPE: one thread per rotated pair ----------------------------------------------------------
// N rows, `heads` heads of D values at the start of each row (row n's first element at n·stride),
// rotate-half pairing: element i of a head turns with element i + D/2. Pair p of the launch is
// (row n, head h, i) with i fastest, so neighbouring threads read neighbouring elements (coalesced).
ZDP_HD constexpr int64_t rope_pairs(int64_t N, int heads, int D) { return N * heads * (D / 2); }
struct RopePair {
  int64_t first;   // element offset of x[i] (its partner x[i + D/2] is first + D/2)
  int64_t table;   // offset of (position n % T, i) in the [T, D/2] cos and sin tables
};
ZDP_HD constexpr RopePair rope_pair(int64_t p, int T, int heads, int D, int64_t stride) {
  const int half = D / 2;
  const int i = static_cast<int>(p % half);
  const int64_t nh = p / half;
  const int h = static_cast<int>(nh % heads);
  const int64_t n = nh / heads;
  return RopePair{n * stride + static_cast<int64_t>(h) * D + i, (n % T) * half + i};
}
// The rotation by angle θ (c = cos θ, s = sign·sin θ: sign +1 forward, −1 for the gradient, the
// transposed rotation), in fp32 as kernels/rope.cpp computes it:
//   o0 = a·c − b·s ;  o1 = b·c + a·s      (a = x[i], b = x[i + D/2])
ZDP_HD inline void rope_rotate(float a, float b, float c, float s, float& o0, float& o1) {
  o0 = a * c - b * s;
  o1 = b * c + a * s;
}

// ---- SwiGLU: one thread per output element ------------------------------------------------------
// inp [N, 2I] (gate | up), out [N, I]: element e = (n, i) of out reads gate n·2I + i and up n·2I + I + i.
ZDP_HD constexpr int64_t swiglu_gate(int64_t e, int I) { return (e / I) * 2 * I + e % I; }
ZDP_HD constexpr int64_t swiglu_up(int64_t e, int I) { return swiglu_gate(e, I) + I; }
// σ(g) = 1/(1 + e^−g) ;  out = g·σ(g)·u.
ZDP_HD inline float swiglu_sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }
ZDP_HD inline float swiglu_value(float g, float u) { return g * swiglu_sigmoid(g) * u; }
// dg = d·u·σ·(1 + g·(1 − σ)) ;  du = d·g·σ (kernels/swiglu.cpp's order of the products).
ZDP_HD inline void swiglu_grads(float d, float g, float u, float& dg, float& du) {
  const float sig = swiglu_sigmoid(g);
  dg = d * u * sig * (1.0f + g * (1.0f - sig));
  du = d * g * sig;
}

// ---- RMSNorm: per-element math of a row whose rstd is known --------------------------------------
// rstd = 1/sqrt(Σx²/C + eps) (from the row's sum of squares) ; out = (x·rstd)·w.
ZDP_HD inline float rmsnorm_rstd(float sum_squares, float inv_c, float eps) {
  return 1.0f / sqrtf(sum_squares * inv_c + eps);
}
// dx += rstd·(d·w − (x·rstd)·mean(dn·n)), with dn_n_mean = Σ (d·w)·(x·rstd) / C.
ZDP_HD inline float rmsnorm_dinp(float d, float w, float x, float rstd, float dn_n_mean) {
  return rstd * (d * w - (x * rstd) * dn_n_mean);
}

}  // namespace zerodp::cuda::llama
