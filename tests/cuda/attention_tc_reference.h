// Causal attention in double with per-element error bounds for the tensor-core algorithm
// (cuda/attention_tc_warp.h), shared by its host emulation test (tests/cuda/test_attention_tc_tiling.cpp)
// and its GPU test (tests/cuda_gpu/test_attention_tc.cu).
//
// The inputs are the 16-bit values widened (exactly) to double. The truth is kernels/attention.h's
// formulas evaluated in double; the bounds are first-order bounds on what the tensor-core algorithm's
// roundings can do, with u the unit roundoff of the 16-bit format (bf16 2^-8, fp16 2^-11), `tiny` the
// absolute error of rounding a number below the format's normal range (fp16: 2^-25; bf16: 2^-134, nil)
// and eps an allowance for everything done in fp32 (the sums in the mma, the exponentials, the online
// rescaling), which is scaled by the magnitudes involved:
//   forward   P̃ = 2^(S·c − m·c) ∈ (0, 1] enters P·V rounded: |δ| ≤ u·P̃ + tiny; l sums the unrounded
//             P̃; O is rounded once when stored. With P = P̃/l (l ≥ 1):
//               |O − O*|_ic ≤ u·(Σ_j P_ij|v_jc| + |O_ic|) + tiny·Σ_j |v_jc| + eps·(2 + Smax_i)·Σ_j P_ij|v_jc|
//             where Smax_i = max_j scale·Σ_c |q_ic||k_jc| bounds the scores' fp32 error relative to eps.
//               |L − L*|_i ≤ eps·(2 + Smax_i) + T·2^-24 + 2^-23·|L_i|
//   backward  D from the stored O: |δD_i| ≤ Σ_c |dO_ic|·bound(O_ic) + eps·Σ_c |dO_ic||O_ic|;
//             dS = P∘(dP − D)·scale in fp32, rounded into its products:
//               |δdS_ij| ≤ u|dS_ij| + tiny + P_ij·scale·(|δD_i| + eps·Σ_c |dO_ic||v_jc|) + eps·(2 + Smax_i)·|dS_ij|
//               |dK − dK*|_jc ≤ Σ_i |δdS_ij||q_ic| + eps·Σ_i |dS_ij||q_ic|
//               |dQ − dQ*|_ic ≤ Σ_j |δdS_ij||k_jc| + eps·Σ_j |dS_ij||k_jc|
//               |dV − dV*|_jc ≤ Σ_i (u·P_ij + tiny + eps·(3 + Smax_i)·P_ij)·|dO_ic|
// Second-order terms are left out: u² is below eps for both formats.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace zerodp::attn_test {

struct ErrorModel {
  double u;     // unit roundoff of the 16-bit format
  double tiny;  // absolute rounding error below its normal range
  double eps;   // fp32 allowance
};
inline ErrorModel bf16_error_model() { return {1.0 / 256, 0x1p-134, 0x1p-16}; }
inline ErrorModel fp16_error_model() { return {1.0 / 2048, 0x1p-25, 0x1p-16}; }

struct TcReference {
  std::vector<double> out, lse, dqkv;              // the truth (dqkv: the gradient alone, nothing added)
  std::vector<double> out_bound, lse_bound, dqkv_bound;  // per element
};

// qkv [B,T,(NH + 2·NKV)·hs] (the query heads, the key heads, the value heads of each token; query head h
// reads key/value head h/(NH/NKV)), dout [B,T,NH·hs]: the 16-bit values, widened. A key/value head's
// dK, dV are the sums over its query heads, and so are their bounds.
inline TcReference tc_reference(const std::vector<double>& qkv, const std::vector<double>& dout, int B, int T, int NH,
                                int NKV, int hs, const ErrorModel& em) {
  const int C = NH * hs, R = (NH + 2 * NKV) * hs, group = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const double u = em.u, tiny = em.tiny, eps = em.eps;
  TcReference r;
  r.out.assign(static_cast<size_t>(B) * T * C, 0.0);
  r.out_bound.assign(r.out.size(), 0.0);
  r.lse.assign(static_cast<size_t>(B) * NH * T, 0.0);
  r.lse_bound.assign(r.lse.size(), 0.0);
  r.dqkv.assign(qkv.size(), 0.0);
  r.dqkv_bound.assign(qkv.size(), 0.0);
  const size_t TT = static_cast<size_t>(T) * T;
  std::vector<double> P(TT), dS(TT), dSerr(TT), Smax(T), dD(T);
  // part 0: query head h; 1, 2: key/value head h.
  auto at = [&](int b, int t, int part, int h, int c) {
    const int first = part == 0 ? 0 : (part == 1 ? NH : NH + NKV);
    return (static_cast<size_t>(b) * T + t) * R + static_cast<size_t>(first + h) * hs + c;
  };
  auto oat = [&](int b, int t, int h, int c) { return (static_cast<size_t>(b) * T + t) * C + h * hs + c; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / group;
      // Forward.
      for (int i = 0; i < T; ++i) {
        double mx = -INFINITY, smax = 0;
        for (int j = 0; j <= i; ++j) {
          double s = 0, sa = 0;
          for (int c = 0; c < hs; ++c) {
            s += qkv[at(b, i, 0, h, c)] * qkv[at(b, j, 1, g, c)];
            sa += std::abs(qkv[at(b, i, 0, h, c)] * qkv[at(b, j, 1, g, c)]);
          }
          P[i * static_cast<size_t>(T) + j] = s * scale;
          mx = std::max(mx, s * scale);
          smax = std::max(smax, sa * scale);
        }
        Smax[i] = smax;
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(P[i * static_cast<size_t>(T) + j] - mx);
        const double L = mx + std::log(sum);
        for (int j = 0; j <= i; ++j) P[i * static_cast<size_t>(T) + j] = std::exp(P[i * static_cast<size_t>(T) + j] - L);
        const size_t li = (static_cast<size_t>(b) * NH + h) * T + i;
        r.lse[li] = L;
        r.lse_bound[li] = eps * (2 + smax) + T * 0x1p-24 + 0x1p-23 * std::abs(L);
        for (int c = 0; c < hs; ++c) {
          double o = 0, mag = 0, vabs = 0;
          for (int j = 0; j <= i; ++j) {
            const double p = P[i * static_cast<size_t>(T) + j], v = qkv[at(b, j, 2, g, c)];
            o += p * v;
            mag += p * std::abs(v);
            vabs += std::abs(v);
          }
          r.out[oat(b, i, h, c)] = o;
          r.out_bound[oat(b, i, h, c)] = u * (mag + std::abs(o)) + tiny * vabs + eps * (2 + smax) * mag;
        }
      }
      // Backward.
      for (int i = 0; i < T; ++i) {
        double D = 0, dmag = 0;
        for (int c = 0; c < hs; ++c) {
          D += dout[oat(b, i, h, c)] * r.out[oat(b, i, h, c)];
          dmag += std::abs(dout[oat(b, i, h, c)]) * r.out_bound[oat(b, i, h, c)] +
                  eps * std::abs(dout[oat(b, i, h, c)] * r.out[oat(b, i, h, c)]);
        }
        dD[i] = dmag;
        for (int j = 0; j <= i; ++j) {
          double dp = 0, dpmag = 0;
          for (int c = 0; c < hs; ++c) {
            dp += dout[oat(b, i, h, c)] * qkv[at(b, j, 2, g, c)];
            dpmag += std::abs(dout[oat(b, i, h, c)] * qkv[at(b, j, 2, g, c)]);
          }
          const size_t ij = i * static_cast<size_t>(T) + j;
          const double p = P[ij], ds = p * (dp - D) * scale;
          dS[ij] = ds;
          dSerr[ij] = u * std::abs(ds) + tiny + p * scale * (dD[i] + eps * dpmag) + eps * (2 + Smax[i]) * std::abs(ds);
        }
      }
      for (int c = 0; c < hs; ++c) {
        for (int j = 0; j < T; ++j) {  // dK, dV of key j: queries i ≥ j (added over the group's heads)
          double dk = 0, dkb = 0, dv = 0, dvb = 0;
          for (int i = j; i < T; ++i) {
            const size_t ij = i * static_cast<size_t>(T) + j;
            const double q = qkv[at(b, i, 0, h, c)], gr = dout[oat(b, i, h, c)];
            dk += dS[ij] * q;
            dkb += (dSerr[ij] + eps * std::abs(dS[ij])) * std::abs(q);
            dv += P[ij] * gr;
            dvb += (u * P[ij] + tiny + eps * (3 + Smax[i]) * P[ij]) * std::abs(gr);
          }
          r.dqkv[at(b, j, 1, g, c)] += dk;
          r.dqkv_bound[at(b, j, 1, g, c)] += dkb;
          r.dqkv[at(b, j, 2, g, c)] += dv;
          r.dqkv_bound[at(b, j, 2, g, c)] += dvb;
        }
        for (int i = 0; i < T; ++i) {  // dQ of query i: keys j ≤ i
          double dq = 0, dqb = 0;
          for (int j = 0; j <= i; ++j) {
            const size_t ij = i * static_cast<size_t>(T) + j;
            const double k = qkv[at(b, j, 1, g, c)];
            dq += dS[ij] * k;
            dqb += (dSerr[ij] + eps * std::abs(dS[ij])) * std::abs(k);
          }
          r.dqkv[at(b, i, 0, h, c)] = dq;
          r.dqkv_bound[at(b, i, 0, h, c)] = dqb;
        }
      }
    }
  return r;
}
// GPT-2's layout: qkv [B,T,3C], NH heads of C/NH.
inline TcReference tc_reference(const std::vector<double>& qkv, const std::vector<double>& dout, int B, int T, int C,
                                int NH, const ErrorModel& em) {
  return tc_reference(qkv, dout, B, T, NH, NH, C / NH, em);
}

// The largest |got − want| / bound over the elements (with the element where it is), and the largest
// |got − want| / max |want| (a normwise-style summary for reports).
struct BoundCheck {
  double worst_ratio = 0;  // ≤ 1: every element within its bound
  size_t worst_at = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;  // max |got − want| / max |want|
  size_t outside = 0;        // elements with |got − want| > bound (or not finite)
};
// got(e) and select(e) (whether element e counts) are callables.
template <class Got, class Select>
BoundCheck check_bounds(Got&& got, const std::vector<double>& want, const std::vector<double>& bound, Select&& select) {
  BoundCheck c;
  double mag = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    if (!select(e)) continue;
    const double err = std::abs(static_cast<double>(got(e)) - want[e]);
    mag = std::max(mag, std::abs(want[e]));
    if (!(err <= bound[e])) ++c.outside;
    const double ratio = bound[e] > 0 ? err / bound[e] : (err > 0 ? INFINITY : 0.0);
    if (!(ratio <= c.worst_ratio)) {
      c.worst_ratio = ratio;
      c.worst_at = e;
    }
    c.max_abs_error = std::max(c.max_abs_error, err);
  }
  c.max_rel_error = mag > 0 ? c.max_abs_error / mag : c.max_abs_error;
  return c;
}

}  // namespace zerodp::attn_test
