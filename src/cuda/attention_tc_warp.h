// The tensor-core attention's warp-level code (cuda/attention_tc.cu), written once for the GPU and for
// the host emulation (tests/cuda/attention_tc_emulation.h, run by tests/cuda/test_attention_tc_tiling.cpp
// against double precision and by tests/cuda_gpu/test_attention_tc.cu against the GPU).
//
// Every function here is a warp's work between two of the block's barriers, written against a "warp
// machine" W that the caller provides:
//   W::Lanes<T>        a per-lane value: on the GPU the thread's own T (operator[] ignores the lane),
//                      on the host T for each of the 32 lanes;
//   w.each(f)          runs f(lane) for the thread's lane (GPU) or for lanes 0..31 in turn (host): the
//                      code between two warp-wide instructions, which only touches its lane's values;
//   w.ldsm_x4<trans>(dst, base, off)   ldmatrix.x4: lane l gives the address base + off(l); dst(l)
//                      points at the lane's four 32-bit registers;
//   w.mma<fmt>(d, a, b)  mma.sync m16n8k16, D = A·B + D, d(l) → 4 floats, a(l) → 4, b(l) → 2 registers;
//   w.quad_max(x), w.quad_sum(x)  x(l) → a float, replaced by the max / sum over the lane's quad
//                      (xor-shuffles 1 then 2: v = v ⊕ v(l^1); v = v ⊕ v(l^2)).
// The GPU machine (cuda/attention_tc_device.cuh) issues the instructions; the host machine computes what
// the PTX ISA says they compute, from attention_tc_tiling.h's ldsm_source and PtxFragments. The template
// parameter Frag is the C-fragment layout this code assumes when it attributes a register to a (row,
// column): the kernels use PtxFragments; the test also runs a deliberately wrong one to show that the
// emulation notices.
//
// Notation (FlashAttention-2): S = Q·Kᵀ (raw scores, fp32), c = scale·log2(e), P = 2^(S·c − m·c) with m
// the running row max of S, l = Σ P, O = Σ P·V / l, L = m·scale + ln l (natural log-sum-exp of the
// scaled scores, as attention.h's contract). Backward: P = 2^(S·c − L·log2 e), dP = dO·Vᵀ,
// dS = P∘(dP − D)·scale, dV = Pᵀ·dO, dK = dSᵀ·Q, dQ = dS·K. P and dS enter the next products rounded to
// the 16-bit format (as the CPU's attention16 path rounds them); l, the softmax and dS itself are fp32.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cstddef>

#include "core/dtype.h"
#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tiling.h"
#include "cuda/hd.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define ZDP_TC_INLINE __forceinline__
#else
#define ZDP_TC_INLINE inline
#endif

// A lambda of the lane: ZDP_LANE(s[ln][nb]) is [&](int ln) { return (s[ln][nb]); } (arrays decay to
// pointers: the accessors the warp machine's instructions take).
#define ZDP_LANE(expr) [&](int ln) { return (expr); }

namespace zerodp::cuda::attn_tc {

using attn::visible;

enum class Fmt16 { kBf16, kF16 };

inline constexpr float kLog2e = 1.4426950408889634f;

// ---- 16-bit values and fp32 helpers -----------------------------------------------------------------
// The conversions are bit-identical on both sides (round to nearest even); fast_exp2 is not (the GPU's
// ex2.approx against the host's exp2f: both within a few fp32 ulps).
template <Fmt16 F>
ZDP_HD ZDP_TC_INLINE uint16_t round16(float x) {
#ifdef __CUDA_ARCH__
  if constexpr (F == Fmt16::kBf16)
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  else
    return __half_as_ushort(__float2half_rn(x));
#else
  return F == Fmt16::kBf16 ? fp32_to_bf16(x) : fp32_to_fp16(x);
#endif
}
template <Fmt16 F>
ZDP_HD ZDP_TC_INLINE float widen16(uint16_t h) {
#ifdef __CUDA_ARCH__
  if constexpr (F == Fmt16::kBf16)
    return __bfloat162float(__ushort_as_bfloat16(h));
  else
    return __half2float(__ushort_as_half(h));
#else
  return F == Fmt16::kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
#endif
}
// Two values rounded to 16 bits in one 32-bit register, lo in the low half.
template <Fmt16 F>
ZDP_HD ZDP_TC_INLINE uint32_t pack16x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  if constexpr (F == Fmt16::kBf16) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&r, &v, 4);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&r, &v, 4);
  }
  return r;
#else
  return static_cast<uint32_t>(round16<F>(lo)) | (static_cast<uint32_t>(round16<F>(hi)) << 16);
#endif
}
// 2^x: on the GPU ex2.approx.ftz (relative error below 2^-22; 2^-inf = 0; results below 2^-126 flush
// to 0, which only drops probabilities far below the 16-bit formats' reach of the row's sum).
ZDP_HD ZDP_TC_INLINE float fast_exp2(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}
// Stores two 16-bit values (one register, 4-byte aligned) / adds two floats into an 8-byte aligned pair.
ZDP_HD ZDP_TC_INLINE void store_pair16(uint16_t* p, uint32_t bits) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint32_t*>(p) = bits;
#else
  memcpy(p, &bits, 4);
#endif
}
ZDP_HD ZDP_TC_INLINE void add_pair_f32(float* p, float x, float y) {
#ifdef __CUDA_ARCH__
  float2 v = *reinterpret_cast<float2*>(p);
  v.x += x;
  v.y += y;
  *reinterpret_cast<float2*>(p) = v;
#else
  p[0] += x;
  p[1] += y;
#endif
}

template <class W, class T>
using LanesOf = typename W::template Lanes<T>;

// acc[2n] and acc[2n+1] (two C fragments of 8 columns) += A·Bᵀ over the head dimension, for each
// 16-column block n < NBLK with active(n): A is the 16 rows from a_row0 of sa, B the rows 16n.. of sb
// (both row-major in shared memory with leading dimension tc_ld(HS)). The products every tile makes:
// S = Q·Kᵀ and dP = dO·Vᵀ (by query rows), Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (by key rows).
template <Fmt16 F, int HS, int NBLK, class W, class Acc, class Active>
ZDP_HD ZDP_TC_INLINE void mma_abt(const W& w, Acc& acc, const uint16_t* sa, int a_row0, const uint16_t* sb,
                                  const Active& active) {
  constexpr int LD = tc_ld(HS), KK = HS / 16;
  ZDP_ATTN_UNROLL
  for (int kk = 0; kk < KK; ++kk) {
    LanesOf<W, uint32_t[4]> a;
    w.template ldsm_x4<false>(ZDP_LANE(a[ln]), sa, ZDP_LANE(ldsm_a_offset(ln, a_row0, 16 * kk, LD)));
    ZDP_ATTN_UNROLL
    for (int n = 0; n < NBLK; ++n) {
      if (active(n)) {
        LanesOf<W, uint32_t[4]> b;
        w.template ldsm_x4<false>(ZDP_LANE(b[ln]), sb, ZDP_LANE(ldsm_bt_offset(ln, 16 * n, 16 * kk, LD)));
        w.template mma<F>(ZDP_LANE(acc[ln][2 * n]), ZDP_LANE(a[ln]), ZDP_LANE(b[ln]));
        w.template mma<F>(ZDP_LANE(acc[ln][2 * n + 1]), ZDP_LANE(a[ln]), ZDP_LANE(b[ln] + 2));
      }
    }
  }
}

// acc(ln)[2m] and acc(ln)[2m+1] += A·B over 16-row k-blocks kb < KB with active(kb), in order, for each
// 16-column block m < HS/16: A the lane's fragments a16[ln][kb] (16 rows × 16 k, already in registers:
// probabilities or dS), B the rows 16kb.. of sb read transposed (row-major in shared memory, leading
// dimension tc_ld(HS)). The products into the kept accumulators: O += P·V, dQ += dS·K (k = keys) and
// dV += Pᵀ·dO, dK += dSᵀ·Q (k = queries).
template <Fmt16 F, int HS, int KB, class W, class AccOf, class A16, class Active>
ZDP_HD ZDP_TC_INLINE void mma_frag_b(const W& w, const AccOf& acc, const A16& a16, const uint16_t* sb,
                                     const Active& active) {
  constexpr int LD = tc_ld(HS);
  ZDP_ATTN_UNROLL
  for (int kb = 0; kb < KB; ++kb) {
    if (!active(kb)) continue;
    ZDP_ATTN_UNROLL
    for (int m = 0; m < HS / 16; ++m) {
      LanesOf<W, uint32_t[4]> b;
      w.template ldsm_x4<true>(ZDP_LANE(b[ln]), sb, ZDP_LANE(ldsm_b_trans_offset(ln, 16 * kb, 16 * m, LD)));
      w.template mma<F>(ZDP_LANE(acc(ln)[2 * m]), ZDP_LANE(a16[ln][kb]), ZDP_LANE(b[ln]));
      w.template mma<F>(ZDP_LANE(acc(ln)[2 * m + 1]), ZDP_LANE(a16[ln][kb]), ZDP_LANE(b[ln] + 2));
    }
  }
}

// Every lane's N C fragments set to 0.
template <class W, int N>
ZDP_HD ZDP_TC_INLINE void zero_frags(const W& w, LanesOf<W, float[N][4]>& f) {
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int n = 0; n < N; ++n) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) f[ln][n][e] = 0.0f;
    }
  });
}

// ---- forward ----------------------------------------------------------------------------------------
// A lane's running state for its two rows (slots, c_slot) over the key tiles.
template <int HS>
struct FwdLane {
  float o[HS / 8][4];  // C fragments of O (unnormalized), n-blocks of 8 head columns
  float m[2];          // running max of the raw scores of the row (−inf before any visible key)
  float l[2];          // the lane's own part of the row's Σ P (its columns; summed over the quad at the end)
};

template <int HS, class W>
ZDP_HD ZDP_TC_INLINE void fwd_warp_init(const W& w, LanesOf<W, FwdLane<HS>>& st) {
  w.each([&](int ln) {
    FwdLane<HS>& t = st[ln];
    ZDP_ATTN_UNROLL
    for (int nb = 0; nb < HS / 8; ++nb) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) t.o[nb][e] = 0.0f;
    }
    t.m[0] = t.m[1] = -INFINITY;
    t.l[0] = t.l[1] = 0.0f;
  });
}

// One key tile: the warp's 16 query rows (tile rows q_row0.., global rows i0..) against the BC keys of sk,
// sv (global keys j0..). c = scale·log2(e).
template <Fmt16 F, int HS, int BC, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void fwd_warp_tile(const W& w, LanesOf<W, FwdLane<HS>>& st, const uint16_t* sq, int q_row0,
                                        const uint16_t* sk, const uint16_t* sv, int i0, int j0, int T, float c) {
  constexpr int NB = BC / 8, KJ = BC / 16;
  const int nkj = active_key_blocks16(i0, j0, T, BC);
  if (nkj == 0) return;  // no pair visible: the tile would change nothing
  const bool masked = !all_visible(i0, kTcWarpRows, j0, BC, T);

  // S = Q·Kᵀ over the active 16-key blocks, k-blocks of 16 head columns in order.
  LanesOf<W, float[NB][4]> s;
  zero_frags<W, NB>(w, s);
  mma_abt<F, HS, KJ, W>(w, s, sq, q_row0, sk, [&](int kj) { return kj < nkj; });

  // Mask, and each row's max over the tile (the lane's columns, then the quad's).
  LanesOf<W, float[2]> mx;
  w.each([&](int ln) {
    mx[ln][0] = mx[ln][1] = -INFINITY;
    ZDP_ATTN_UNROLL
    for (int nb = 0; nb < NB; ++nb) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) {
        float& x = s[ln][nb][e];
        if (masked && !visible(i0 + Frag::c_row(ln, e), j0 + 8 * nb + Frag::c_col(ln, e), T)) x = -INFINITY;
        mx[ln][c_slot(e)] = fmaxf(mx[ln][c_slot(e)], x);
      }
    }
  });
  w.quad_max(ZDP_LANE(&mx[ln][0]));
  w.quad_max(ZDP_LANE(&mx[ln][1]));

  // Online softmax: rescale O and l by 2^((m − m')·c), P = 2^(S·c − m'·c) into l (fp32) and, rounded,
  // into the A fragments of P·V.
  LanesOf<W, uint32_t[KJ][4]> p16;
  w.each([&](int ln) {
    FwdLane<HS>& t = st[ln];
    float corr[2], neg_mc[2];
    ZDP_ATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float m_new = fmaxf(t.m[h], mx[ln][h]);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet: P = 0
      corr[h] = fast_exp2((t.m[h] - m_use) * c);
      neg_mc[h] = -m_use * c;
      t.m[h] = m_new;
      t.l[h] *= corr[h];
    }
    ZDP_ATTN_UNROLL
    for (int nb = 0; nb < HS / 8; ++nb) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) t.o[nb][e] *= corr[c_slot(e)];
    }
    ZDP_ATTN_UNROLL
    for (int kj = 0; kj < KJ; ++kj) {
      if (kj < nkj) {
        ZDP_ATTN_UNROLL
        for (int reg = 0; reg < 4; ++reg) {
          const int nb = repack_nblock(kj, reg), e0 = repack_elem(reg, 0), e1 = repack_elem(reg, 1);
          const float p0 = fast_exp2(fmaf(s[ln][nb][e0], c, neg_mc[c_slot(e0)]));
          const float p1 = fast_exp2(fmaf(s[ln][nb][e1], c, neg_mc[c_slot(e1)]));
          t.l[c_slot(e0)] += p0;
          t.l[c_slot(e1)] += p1;
          p16[ln][kj][reg] = pack16x2<F>(p0, p1);
        }
      }
    }
  });

  // O += P·V: k-blocks of 16 keys in order, V's tile read transposed.
  mma_frag_b<F, HS, KJ, W>(w, ZDP_LANE(st[ln].o), p16, sv, [&](int kj) { return kj < nkj; });
}

// After the last tile: l over the quad, O = o/l rounded to 16 bits into out (rows i0.., row stride
// `stride` elements, the head's column 0 at out_h), L = m·scale + ln l into lse_h[i] (by the quad's
// first lane). Rows ≥ T are not written.
template <Fmt16 F, int HS, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void fwd_warp_finish(const W& w, LanesOf<W, FwdLane<HS>>& st, uint16_t* out_h,
                                          ptrdiff_t stride, float* lse_h, int i0, int T, float scale) {
  w.quad_sum(ZDP_LANE(&st[ln].l[0]));
  w.quad_sum(ZDP_LANE(&st[ln].l[1]));
  w.each([&](int ln) {
    const FwdLane<HS>& t = st[ln];
    ZDP_ATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int i = i0 + Frag::c_row(ln, 2 * h);
      if (i >= T) continue;
      const float inv = 1.0f / t.l[h];
      ZDP_ATTN_UNROLL
      for (int nb = 0; nb < HS / 8; ++nb)
        store_pair16(out_h + static_cast<ptrdiff_t>(i) * stride + 8 * nb + Frag::c_col(ln, 2 * h),
                     pack16x2<F>(t.o[nb][2 * h] * inv, t.o[nb][2 * h + 1] * inv));
      if ((ln & 3) == 0) lse_h[i] = t.m[h] * scale + logf(t.l[h]);
    }
  });
}

// ---- backward: D ------------------------------------------------------------------------------------
// D_i = Σ_c dO_ic·O_ic: each of hs/8 lanes takes 8 consecutive columns (one 16-byte load of each),
// fmaf in column order; the lanes' parts are then summed by xor-shuffles 1, 2, 4, ... (every lane ends
// with the same bits: each step adds the same two values, in either order).
template <Fmt16 F>
ZDP_HD ZDP_TC_INLINE float dot8(const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  float s = 0.0f;
  ZDP_ATTN_UNROLL
  for (int r = 0; r < 4; ++r) {
    s = fmaf(widen16<F>(static_cast<uint16_t>(a[r] & 0xffffu)), widen16<F>(static_cast<uint16_t>(b[r] & 0xffffu)), s);
    s = fmaf(widen16<F>(static_cast<uint16_t>(a[r] >> 16)), widen16<F>(static_cast<uint16_t>(b[r] >> 16)), s);
  }
  return s;
}

// ---- backward: dK, dV (a block per 64 keys, each warp 16 of them) -----------------------------------
template <int HS>
struct KvLane {
  float dk[HS / 8][4];  // C fragments: rows = the warp's keys, columns = head columns
  float dv[HS / 8][4];
};

template <int HS, class W>
ZDP_HD ZDP_TC_INLINE void kv_warp_init(const W& w, LanesOf<W, KvLane<HS>>& st) {
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int nb = 0; nb < HS / 8; ++nb) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) st[ln].dk[nb][e] = st[ln].dv[nb][e] = 0.0f;
    }
  });
}

// One query tile (BQ queries from global i0: sq, sdo rows, sL, sD their L and D) against the warp's 16 keys
// (tile rows k_row0.. of sk, sv; global keys j0..). Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ are 16 keys × BQ queries.
template <Fmt16 F, int HS, int BQ, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void kv_warp_tile(const W& w, LanesOf<W, KvLane<HS>>& st, const uint16_t* sk, const uint16_t* sv,
                                       int k_row0, const uint16_t* sq, const uint16_t* sdo, const float* sL,
                                       const float* sD, int j0, int i0, int T, float c, float scale) {
  constexpr int NQ = BQ / 8, KQ = BQ / 16;
  bool act[KQ];
  bool any = false;
  ZDP_ATTN_UNROLL
  for (int kq = 0; kq < KQ; ++kq) {
    act[kq] = query_block16_active(i0 + 16 * kq, j0, T);
    any = any || act[kq];
  }
  if (!any) return;
  const bool masked = !all_visible(i0, BQ, j0, kTcWarpRows, T);

  LanesOf<W, float[NQ][4]> s, dp;
  zero_frags<W, NQ>(w, s);
  zero_frags<W, NQ>(w, dp);
  // Sᵀ = K·Qᵀ.
  mma_abt<F, HS, KQ, W>(w, s, sk, k_row0, sq, [&](int kq) { return act[kq]; });

  // Pᵀ = 2^(Sᵀ·c − L·log2 e), 0 where invisible: kept in fp32 (in s) for dS, and rounded into A fragments
  // (rows = keys, k = queries) for dV.
  LanesOf<W, uint32_t[KQ][4]> p16;
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int kq = 0; kq < KQ; ++kq) {
      if (!act[kq]) continue;
      ZDP_ATTN_UNROLL
      for (int reg = 0; reg < 4; ++reg) {
        const int nb = repack_nblock(kq, reg);
        ZDP_ATTN_UNROLL
        for (int half = 0; half < 2; ++half) {
          const int e = repack_elem(reg, half);
          const int ii = 8 * nb + Frag::c_col(ln, e);  // the query's row in the tile
          float& x = s[ln][nb][e];
          x = fast_exp2(fmaf(x, c, -sL[ii] * kLog2e));
          if (masked && !visible(i0 + ii, j0 + Frag::c_row(ln, e), T)) x = 0.0f;
        }
        p16[ln][kq][reg] = pack16x2<F>(s[ln][nb][repack_elem(reg, 0)], s[ln][nb][repack_elem(reg, 1)]);
      }
    }
  });

  // dV += Pᵀ·dO: k-blocks of 16 queries in order, dO read transposed.
  mma_frag_b<F, HS, KQ, W>(w, ZDP_LANE(st[ln].dv), p16, sdo, [&](int kq) { return act[kq]; });

  // dPᵀ = V·dOᵀ.
  mma_abt<F, HS, KQ, W>(w, dp, sv, k_row0, sdo, [&](int kq) { return act[kq]; });

  // dSᵀ = Pᵀ∘(dPᵀ − D)·scale (fp32 Pᵀ), rounded into A fragments.
  LanesOf<W, uint32_t[KQ][4]> ds16;
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int kq = 0; kq < KQ; ++kq) {
      if (!act[kq]) continue;
      ZDP_ATTN_UNROLL
      for (int reg = 0; reg < 4; ++reg) {
        const int nb = repack_nblock(kq, reg);
        float ds[2];
        ZDP_ATTN_UNROLL
        for (int half = 0; half < 2; ++half) {
          const int e = repack_elem(reg, half);
          ds[half] = s[ln][nb][e] * (dp[ln][nb][e] - sD[8 * nb + Frag::c_col(ln, e)]) * scale;
        }
        ds16[ln][kq][reg] = pack16x2<F>(ds[0], ds[1]);
      }
    }
  });

  // dK += dSᵀ·Q: k-blocks of 16 queries in order, Q read transposed.
  mma_frag_b<F, HS, KQ, W>(w, ZDP_LANE(st[ln].dk), ds16, sq, [&](int kq) { return act[kq]; });
}

// dK, dV added into dqkv (dk_h, dv_h: the head's column 0 of key row 0 in the k and v thirds; row stride
// `stride`), keys j0.. (< T), one add per element.
template <int HS, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void kv_warp_finish(const W& w, LanesOf<W, KvLane<HS>>& st, float* dk_h, float* dv_h,
                                         ptrdiff_t stride, int j0, int T) {
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int j = j0 + Frag::c_row(ln, 2 * h);
      if (j >= T) continue;
      ZDP_ATTN_UNROLL
      for (int nb = 0; nb < HS / 8; ++nb) {
        const ptrdiff_t at = static_cast<ptrdiff_t>(j) * stride + 8 * nb + Frag::c_col(ln, 2 * h);
        add_pair_f32(dk_h + at, st[ln].dk[nb][2 * h], st[ln].dk[nb][2 * h + 1]);
        add_pair_f32(dv_h + at, st[ln].dv[nb][2 * h], st[ln].dv[nb][2 * h + 1]);
      }
    }
  });
}

// ---- backward: dQ (a block per 64 query rows, each warp 16 of them) ---------------------------------
template <int HS>
struct QLane {
  float dq[HS / 8][4];
  float neg_lc[2];  // −L·log2(e) of the lane's two rows
  float d[2];       // D of the lane's two rows
};

// L_h, D_h: the head's L and D (row t at [t]).
template <int HS, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void q_warp_init(const W& w, LanesOf<W, QLane<HS>>& st, const float* L_h, const float* D_h,
                                      int i0, int T) {
  w.each([&](int ln) {
    QLane<HS>& t = st[ln];
    ZDP_ATTN_UNROLL
    for (int nb = 0; nb < HS / 8; ++nb) {
      ZDP_ATTN_UNROLL
      for (int e = 0; e < 4; ++e) t.dq[nb][e] = 0.0f;
    }
    ZDP_ATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int i = i0 + Frag::c_row(ln, 2 * h);
      t.neg_lc[h] = i < T ? -L_h[i] * kLog2e : 0.0f;
      t.d[h] = i < T ? D_h[i] : 0.0f;
    }
  });
}

// One key tile (BC keys from global j0 in sk, sv) against the warp's 16 query rows (tile rows q_row0.. of
// sq, sdo; global rows i0..).
template <Fmt16 F, int HS, int BC, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void q_warp_tile(const W& w, LanesOf<W, QLane<HS>>& st, const uint16_t* sq, const uint16_t* sdo,
                                      int q_row0, const uint16_t* sk, const uint16_t* sv, int i0, int j0, int T,
                                      float c, float scale) {
  constexpr int NB = BC / 8, KJ = BC / 16;
  const int nkj = active_key_blocks16(i0, j0, T, BC);
  if (nkj == 0) return;
  const bool masked = !all_visible(i0, kTcWarpRows, j0, BC, T);

  LanesOf<W, float[NB][4]> s, dp;
  zero_frags<W, NB>(w, s);
  zero_frags<W, NB>(w, dp);
  // S = Q·Kᵀ, dP = dO·Vᵀ.
  mma_abt<F, HS, KJ, W>(w, s, sq, q_row0, sk, [&](int kj) { return kj < nkj; });
  mma_abt<F, HS, KJ, W>(w, dp, sdo, q_row0, sv, [&](int kj) { return kj < nkj; });

  // dS = P∘(dP − D)·scale with P = 2^(S·c − L·log2 e) (0 where invisible), rounded into A fragments.
  LanesOf<W, uint32_t[KJ][4]> ds16;
  w.each([&](int ln) {
    const QLane<HS>& t = st[ln];
    ZDP_ATTN_UNROLL
    for (int kj = 0; kj < KJ; ++kj) {
      if (kj >= nkj) continue;
      ZDP_ATTN_UNROLL
      for (int reg = 0; reg < 4; ++reg) {
        const int nb = repack_nblock(kj, reg);
        float ds[2];
        ZDP_ATTN_UNROLL
        for (int half = 0; half < 2; ++half) {
          const int e = repack_elem(reg, half), h = c_slot(e);
          float pe = fast_exp2(fmaf(s[ln][nb][e], c, t.neg_lc[h]));
          if (masked && !visible(i0 + Frag::c_row(ln, e), j0 + 8 * nb + Frag::c_col(ln, e), T)) pe = 0.0f;
          ds[half] = pe * (dp[ln][nb][e] - t.d[h]) * scale;
        }
        ds16[ln][kj][reg] = pack16x2<F>(ds[0], ds[1]);
      }
    }
  });

  // dQ += dS·K: k-blocks of 16 keys in order, K's tile read transposed.
  mma_frag_b<F, HS, KJ, W>(w, ZDP_LANE(st[ln].dq), ds16, sk, [&](int kj) { return kj < nkj; });
}

// dQ added into dqkv (dq_h: the head's column 0 of row 0 in the q third; row stride `stride`).
template <int HS, class Frag, class W>
ZDP_HD ZDP_TC_INLINE void q_warp_finish(const W& w, LanesOf<W, QLane<HS>>& st, float* dq_h, ptrdiff_t stride, int i0,
                                        int T) {
  w.each([&](int ln) {
    ZDP_ATTN_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int i = i0 + Frag::c_row(ln, 2 * h);
      if (i >= T) continue;
      ZDP_ATTN_UNROLL
      for (int nb = 0; nb < HS / 8; ++nb)
        add_pair_f32(dq_h + static_cast<ptrdiff_t>(i) * stride + 8 * nb + Frag::c_col(ln, 2 * h),
                     st[ln].dq[nb][2 * h], st[ln].dq[nb][2 * h + 1]);
    }
  });
}

}  // namespace zerodp::cuda::attn_tc
