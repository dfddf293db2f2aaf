// The tensor-core attention's kernels run on the host (tests of cuda/attention_tc.cu): a warp machine
// for cuda/attention_tc_warp.h whose lanes are arrays and whose two instructions compute what the PTX ISA
// says (ldmatrix by attention_tc_tiling.h's ldsm_source, mma.sync by PtxFragments), and the kernels'
// block loops around the shared warp code (the tile copies with the kernels' chunk mapping, done
// before each tile instead of cp.async). Used by tests/cuda/test_attention_tc_tiling.cpp (against
// double precision) and tests/cuda_gpu/test_attention_tc.cu (against the GPU). Host code only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tc_warp.h"
#include "cuda/attention_tiling.h"
#include "cuda/hd.h"

namespace zerodp::cuda::attn_tc::emulation {

// The host's warp machine: each lane's registers, and the two instructions as the PTX ISA defines them
// (ldmatrix by ldsm_source, mma by PtxFragments: the specification, whatever layout the code under test
// assumes).
// Its members are __host__ __device__ (with host-only bodies) only so that nvcc accepts the shared warp
// code's calls when a .cu includes this file (the GPU test); they never run on a GPU.
#ifdef __CUDA_ARCH__
#define ZDP_HOST_ONLY(...)
#else
#define ZDP_HOST_ONLY(...) __VA_ARGS__
#endif
struct HostWarp {
  template <class T>
  struct Lanes {
    T v[32];
    ZDP_HD T& operator[](int l) { return v[l]; }
    ZDP_HD const T& operator[](int l) const { return v[l]; }
  };
  long* misaligned_rows = nullptr;  // counts ldmatrix row addresses that are not 16-byte aligned

  template <class Fn>
  ZDP_HD void each(Fn&& f) const {
    for (int l = 0; l < 32; ++l) f(l);
  }

  template <bool kTrans, class Dst, class Off>
  ZDP_HD void ldsm_x4(Dst&& dst, const uint16_t* base, Off&& off) const {
    ZDP_HOST_ONLY(
      int rows[32];
      for (int l = 0; l < 32; ++l) {
        rows[l] = off(l);
        if (misaligned_rows != nullptr && rows[l] % 8 != 0) ++*misaligned_rows;
      }
      for (int l = 0; l < 32; ++l)
        for (int reg = 0; reg < 4; ++reg) {
          uint32_t v = 0;
          for (int half = 0; half < 2; ++half) {
            const LdsmSource s = ldsm_source(l, reg, half, kTrans);
            v |= static_cast<uint32_t>(base[rows[s.addr_lane] + s.elem]) << (16 * half);
          }
          dst(l)[reg] = v;
        })
  }

  // D = A·B + C: the exact products summed in double and rounded to fp32 once (the hardware's internal
  // order and precision are its own; fp32 or better is what the error model assumes).
  template <Fmt16 F, class D, class A, class B>
  ZDP_HD void mma(D&& dacc, A&& aacc, B&& bacc) const {
    ZDP_HOST_ONLY(
      double a[16][16], b[16][8], c[16][8];
      for (int l = 0; l < 32; ++l) {
        for (int e = 0; e < 8; ++e)
          a[PtxFragments::a_row(l, e)][PtxFragments::a_col(l, e)] =
              widen16<F>(static_cast<uint16_t>(aacc(l)[e >> 1] >> (16 * (e & 1))));
        for (int e = 0; e < 4; ++e) {
          b[PtxFragments::b_row(l, e)][PtxFragments::b_col(l, e)] =
              widen16<F>(static_cast<uint16_t>(bacc(l)[e >> 1] >> (16 * (e & 1))));
          c[PtxFragments::c_row(l, e)][PtxFragments::c_col(l, e)] = dacc(l)[e];
        }
      }
      for (int l = 0; l < 32; ++l)
        for (int e = 0; e < 4; ++e) {
          const int r = PtxFragments::c_row(l, e), n = PtxFragments::c_col(l, e);
          double s = c[r][n];
          for (int k = 0; k < 16; ++k) s += a[r][k] * b[k][n];
          dacc(l)[e] = static_cast<float>(s);
        })
  }

  // The xor-shuffles 1 then 2: v = op(v, v(l ^ m)).
  template <bool kMax, class X>
  ZDP_HD static void butterfly(X&& x) {
    ZDP_HOST_ONLY(
      for (int m = 1; m <= 2; m <<= 1) {
        float v[32];
        for (int l = 0; l < 32; ++l) v[l] = *x(l);
        for (int l = 0; l < 32; ++l) *x(l) = kMax ? fmaxf(v[l], v[l ^ m]) : v[l] + v[l ^ m];
      })
  }
  template <class X>
  ZDP_HD void quad_max(X&& x) const {
    butterfly<true>(x);
  }
  template <class X>
  ZDP_HD void quad_sum(X&& x) const {
    butterfly<false>(x);
  }
};

// A problem as the kernels see it: 16-bit bits. Normal inputs (q scaled by q_scale: larger scores, a
// sharper softmax), dout 0.05·N(0, 1), the initial dqkv 0.01·N(0, 1). NKV key/value heads (NKV = NH:
// GPT-2's layout, qkv [B,T,3C]); qkv [B,T,(NH + 2·NKV)·hs], out and dout [B,T,NH·hs] = [B,T,C].
struct Problem16 {
  int B, T, NH, hs, C;
  Fmt16 fmt;
  std::vector<uint16_t> qkv, dout;
  std::vector<float> dqkv0;  // what the backward adds into
  int NKV;
  attn::HeadLayout layout() const { return attn::HeadLayout{NH, NKV, hs}; }
  // Which part of qkv element e is in: 0 (a query head), 1 (a key head), 2 (a value head).
  int part_of(size_t e) const {
    const int col = static_cast<int>(e % static_cast<size_t>(attn::qkv_row(layout())));
    return col < NH * hs ? 0 : (col < (NH + NKV) * hs ? 1 : 2);
  }
};

inline Problem16 make_problem(Fmt16 fmt, int B, int T, int NH, int hs, uint32_t seed, float q_scale = 1.0f,
                              int NKV = 0) {
  Problem16 p{B, T, NH, hs, NH * hs, fmt, {}, {}, {}, NKV > 0 ? NKV : NH};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto r16 = [&](float x) { return fmt == Fmt16::kBf16 ? round16<Fmt16::kBf16>(x) : round16<Fmt16::kF16>(x); };
  p.qkv.resize(static_cast<size_t>(B) * T * attn::qkv_row(p.layout()));
  for (size_t e = 0; e < p.qkv.size(); ++e) p.qkv[e] = r16(nd(rng) * (p.part_of(e) == 0 ? q_scale : 1.0f));
  p.dout.resize(static_cast<size_t>(B) * T * p.C);
  for (auto& x : p.dout) x = r16(0.05f * nd(rng));
  p.dqkv0.resize(p.qkv.size());
  for (auto& x : p.dqkv0) x = 0.01f * nd(rng);
  return p;
}

inline float scale_of(int hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }

// load_rows_async of attention_tc.cu on the host: the same chunks, zeros for rows ≥ T.
template <int HS>
void copy_rows(uint16_t* tile, const uint16_t* src, ptrdiff_t stride, int row0, int rows, int T) {
  for (int id = 0; id < rows * (HS / 8); ++id) {
    const int r = tile_chunk_row(id, HS), col = tile_chunk_col(id, HS), t = row0 + r;
    for (int x = 0; x < 8; ++x)
      tile[r * tc_ld(HS) + col + x] = t < T ? src[static_cast<ptrdiff_t>(t) * stride + col + x] : uint16_t{0};
  }
}
inline void copy_stats(float* dst, const float* src, int row0, int rows, int T) {
  for (int id = 0; id < rows; ++id) dst[id] = row0 + id < T ? src[row0 + id] : 0.0f;
}

struct Emulated {
  std::vector<uint16_t> out;
  std::vector<float> lse, D, dqkv;
  long misaligned_rows = 0;
};

// attention_tc.cu's kernels, block by block, with the host warp machine.
template <Fmt16 F, int HS, class Frag>
void emulate_forward(const Problem16& p, Emulated& r) {
  constexpr int BR = tc_block_rows(), BC = tc_block_keys(), LD = tc_ld(HS);
  const int T = p.T, NH = p.NH;
  const attn::HeadLayout L = p.layout();
  const ptrdiff_t stride = attn::qkv_row(L);
  const float scale = scale_of(HS), c = scale * kLog2e;
  r.out.assign(static_cast<size_t>(p.B) * T * attn::out_row(L), 0);
  r.lse.assign(static_cast<size_t>(p.B) * NH * T, 0.0f);
  HostWarp w;
  w.misaligned_rows = &r.misaligned_rows;
  std::vector<uint16_t> sq(BR * LD), skv(4 * BC * LD);
  auto st = std::make_unique<HostWarp::Lanes<FwdLane<HS>>[]>(kTcWarps);
  for (int bh = 0; bh < p.B * NH; ++bh)  // tc_query_grid's x
    for (int qb = 0; qb < attn::ceil_div(T, BR); ++qb) {
      const attn::HeadRows head = attn::head_rows(bh, T, L);
      const uint16_t *q = p.qkv.data() + head.q, *k = p.qkv.data() + head.k, *v = p.qkv.data() + head.v;
      copy_rows<HS>(sq.data(), q, stride, qb * BR, BR, T);
      for (int wp = 0; wp < kTcWarps; ++wp) fwd_warp_init<HS>(w, st[wp]);
      const int nkb = attn::key_blocks_visited(qb, T, BR, BC);
      for (int kb = 0; kb < nkb; ++kb) {
        uint16_t* cur = skv.data() + (kb & 1) * 2 * BC * LD;
        copy_rows<HS>(cur, k, stride, kb * BC, BC, T);
        copy_rows<HS>(cur + BC * LD, v, stride, kb * BC, BC, T);
        for (int wp = 0; wp < kTcWarps; ++wp)
          fwd_warp_tile<F, HS, BC, Frag>(w, st[wp], sq.data(), wp * kTcWarpRows, cur, cur + BC * LD,
                                         qb * BR + wp * kTcWarpRows, kb * BC, T, c);
      }
      for (int wp = 0; wp < kTcWarps; ++wp)
        fwd_warp_finish<F, HS, Frag>(w, st[wp], r.out.data() + head.out, attn::out_row(L), r.lse.data() + head.stat,
                                     qb * BR + wp * kTcWarpRows, T, scale);
    }
}

template <Fmt16 F, int HS, class Frag>
void emulate_backward(const Problem16& p, Emulated& r) {
  const int T = p.T, NH = p.NH;
  const attn::HeadLayout L = p.layout();
  const ptrdiff_t stride = attn::qkv_row(L), out_stride = attn::out_row(L);
  const float scale = scale_of(HS), c = scale * kLog2e;
  HostWarp w;
  w.misaligned_rows = &r.misaligned_rows;
  // D: hs/8 lanes per row, dot8 each, xor-butterfly (tc_row_dot_kernel).
  r.D.assign(static_cast<size_t>(p.B) * NH * T, 0.0f);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        constexpr int G = HS / 8;
        float part[G];
        for (int g = 0; g < G; ++g) {
          uint32_t a[4], o[4];
          const ptrdiff_t at = attn::out_index(b, t, h, 8 * g, T, L);
          std::memcpy(a, p.dout.data() + at, 16);
          std::memcpy(o, r.out.data() + at, 16);
          part[g] = dot8<F>(a, o);
        }
        for (int m = 1; m < G; m <<= 1) {
          float next[G];
          for (int g = 0; g < G; ++g) next[g] = part[g] + part[g ^ m];
          std::copy(next, next + G, part);
        }
        r.D[attn::row_stat_index(b, h, t, T, NH)] = part[0];
      }
  r.dqkv = p.dqkv0;
  // dK, dV (tc_backward_kv_kernel): a block per (b, key/value head, key block); its tiles are its query
  // heads' in head order, each one's query blocks from the diagonal down (the kernel's `it` loop).
  {
    constexpr int BK = tc_kv_block_keys(), BQ = tc_kv_query_tile(HS), LD = tc_ld(HS);
    std::vector<uint16_t> sk(BK * LD), sv(BK * LD), sqd(4 * BQ * LD);
    std::vector<float> stats(4 * BQ);
    auto st = std::make_unique<HostWarp::Lanes<KvLane<HS>>[]>(kTcWarps);
    for (int bg = 0; bg < p.B * p.NKV; ++bg)  // tc_key_grid's x
      for (int kb = 0; kb < attn::ceil_div(T, BK); ++kb) {
        const attn::KvHeadRows kv = attn::kv_head_rows(bg, T, L);
        copy_rows<HS>(sk.data(), p.qkv.data() + kv.k, stride, kb * BK, BK, T);
        copy_rows<HS>(sv.data(), p.qkv.data() + kv.v, stride, kb * BK, BK, T);
        for (int wp = 0; wp < kTcWarps; ++wp) kv_warp_init<HS>(w, st[wp]);
        const int qb0 = attn::first_query_block(kb, BQ, BK), per_head = attn::ceil_div(T, BQ) - qb0;
        for (int it = 0; it < attn::group_size(L) * per_head; ++it) {
          const attn::HeadRows head = attn::head_rows(attn::query_block_x(kv, it / per_head, L), T, L);
          const int qb = qb0 + it % per_head, u = it & 1;
          uint16_t* sq = sqd.data() + 2 * u * BQ * LD;
          uint16_t* sdo = sqd.data() + (2 * u + 1) * BQ * LD;
          copy_rows<HS>(sq, p.qkv.data() + head.q, stride, qb * BQ, BQ, T);
          copy_rows<HS>(sdo, p.dout.data() + head.out, out_stride, qb * BQ, BQ, T);
          copy_stats(stats.data() + 2 * u * BQ, r.lse.data() + head.stat, qb * BQ, BQ, T);
          copy_stats(stats.data() + (2 * u + 1) * BQ, r.D.data() + head.stat, qb * BQ, BQ, T);
          for (int wp = 0; wp < kTcWarps; ++wp)
            kv_warp_tile<F, HS, BQ, Frag>(w, st[wp], sk.data(), sv.data(), wp * kTcWarpRows, sq, sdo,
                                          stats.data() + 2 * u * BQ, stats.data() + (2 * u + 1) * BQ,
                                          kb * BK + wp * kTcWarpRows, qb * BQ, T, c, scale);
        }
        for (int wp = 0; wp < kTcWarps; ++wp)
          kv_warp_finish<HS, Frag>(w, st[wp], r.dqkv.data() + kv.k, r.dqkv.data() + kv.v, stride,
                                   kb * BK + wp * kTcWarpRows, T);
      }
  }
  // dQ (tc_backward_q_kernel): a block per (b, query head, query block), its key/value head's keys.
  {
    constexpr int BR = tc_block_rows(), BC = tc_block_keys(), LD = tc_ld(HS);
    std::vector<uint16_t> sq(BR * LD), sdo(BR * LD), skv(4 * BC * LD);
    auto st = std::make_unique<HostWarp::Lanes<QLane<HS>>[]>(kTcWarps);
    for (int bh = 0; bh < p.B * NH; ++bh)
      for (int qb = 0; qb < attn::ceil_div(T, BR); ++qb) {
        const attn::HeadRows head = attn::head_rows(bh, T, L);
        const uint16_t *k = p.qkv.data() + head.k, *v = p.qkv.data() + head.v;
        copy_rows<HS>(sq.data(), p.qkv.data() + head.q, stride, qb * BR, BR, T);
        copy_rows<HS>(sdo.data(), p.dout.data() + head.out, out_stride, qb * BR, BR, T);
        for (int wp = 0; wp < kTcWarps; ++wp)
          q_warp_init<HS, Frag>(w, st[wp], r.lse.data() + head.stat, r.D.data() + head.stat,
                                qb * BR + wp * kTcWarpRows, T);
        for (int kb = 0; kb < attn::key_blocks_visited(qb, T, BR, BC); ++kb) {
          uint16_t* cur = skv.data() + (kb & 1) * 2 * BC * LD;
          copy_rows<HS>(cur, k, stride, kb * BC, BC, T);
          copy_rows<HS>(cur + BC * LD, v, stride, kb * BC, BC, T);
          for (int wp = 0; wp < kTcWarps; ++wp)
            q_warp_tile<F, HS, BC, Frag>(w, st[wp], sq.data(), sdo.data(), wp * kTcWarpRows, cur, cur + BC * LD,
                                         qb * BR + wp * kTcWarpRows, kb * BC, T, c, scale);
        }
        for (int wp = 0; wp < kTcWarps; ++wp)
          q_warp_finish<HS, Frag>(w, st[wp], r.dqkv.data() + head.q, stride, qb * BR + wp * kTcWarpRows, T);
      }
  }
}

template <Fmt16 F, int HS, class Frag = PtxFragments>
Emulated emulate(const Problem16& p) {
  Emulated r;
  emulate_forward<F, HS, Frag>(p, r);
  emulate_backward<F, HS, Frag>(p, r);
  return r;
}

}  // namespace zerodp::cuda::attn_tc::emulation
