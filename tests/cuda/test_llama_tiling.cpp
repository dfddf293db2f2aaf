// The Llama family's GPU kernels without a GPU (cuda/llama_tiling.h, and elementwise_tiling.h's layouts
// that RMSNorm uses): the kernels' launches run on the host, thread by thread in their grid-stride loops
// (or warp by warp, lane by lane for RMSNorm's rows, with the warp's xor butterfly; block by block for its
// column sums), calling the same index maps and per-element functions the kernels call, and the results
// are compared with kernels/{rope,swiglu,rmsnorm}.h's formulas evaluated in double:
//   - every element the kernels should touch is touched exactly once, nothing else is (RoPE's strided
//     rows leave the value heads alone; SwiGLU reads each gate and up value once);
//   - fp32 results within a few fp32 ulps of the formulas, 16-bit results within one rounding of them;
//   - RoPE's backward is the forward's transpose (⟨R·x, y⟩ = ⟨x, Rᵀ·y⟩), SwiGLU's and RMSNorm's
//     gradients agree with central differences of the double forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/elementwise_tiling.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda::llama {
namespace {

namespace tl = tiling;

// Thread ids of a grid-stride loop over n items, as the kernels launch it (elementwise_blocks with
// max_blocks, kElementwiseBlock threads): f(i) for each item i, in each thread's order.
template <class F>
void grid_stride(size_t n, int64_t max_blocks, F&& f) {
  const int64_t blocks = tl::elementwise_blocks(n, tl::kElementwiseBlock, max_blocks);
  const size_t step = tl::elementwise_stride(blocks, tl::kElementwiseBlock);
  for (int64_t b = 0; b < blocks; ++b)
    for (int t = 0; t < tl::kElementwiseBlock; ++t)
      for (size_t i = static_cast<size_t>(b) * tl::kElementwiseBlock + t; i < n; i += step) f(i);
}

std::vector<float> randn(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
float round_bf16(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }
constexpr double kFp32 = 0x1p-24;  // fp32's unit roundoff
constexpr double kBf16 = 0x1p-8;   // bf16's

// ---- RoPE ----------------------------------------------------------------------------------------
struct RopeShape {
  int N, T, heads, D;
  int64_t stride;
};
const RopeShape kRopeShapes[] = {
    {1, 1, 1, 2, 2}, {6, 3, 2, 8, 24}, {10, 4, 3, 64, 5 * 64}, {7, 7, 5, 16, 5 * 16}, {9, 2, 4, 128, 6 * 128}};

// The angles' tables [T, D/2] (model/rope.h computes them from inv_freq; any values do here).
void rope_tables(int T, int D, std::vector<float>& cos, std::vector<float>& sin) {
  cos.resize(static_cast<size_t>(T) * (D / 2));
  sin.resize(cos.size());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < D / 2; ++i) {
      const double theta = t * std::pow(10000.0, -2.0 * i / D) + 0.1 * i;
      cos[static_cast<size_t>(t) * (D / 2) + i] = static_cast<float>(std::cos(theta));
      sin[static_cast<size_t>(t) * (D / 2) + i] = static_cast<float>(std::sin(theta));
    }
}

// rope_kernel on the host: sign +1 forward, −1 backward; `round` rounds each stored value (16-bit).
template <class Round>
void run_rope(std::vector<float>& x, const std::vector<float>& cos, const std::vector<float>& sin, const RopeShape& s,
              float sign, int64_t max_blocks, Round round) {
  const int64_t pairs = rope_pairs(s.N, s.heads, s.D);
  grid_stride(static_cast<size_t>(pairs), max_blocks, [&](size_t p) {
    const RopePair at = rope_pair(static_cast<int64_t>(p), s.T, s.heads, s.D, s.stride);
    float o0, o1;
    rope_rotate(x[at.first], x[at.first + s.D / 2], cos[at.table], sign * sin[at.table], o0, o1);
    x[at.first] = round(o0);
    x[at.first + s.D / 2] = round(o1);
  });
}

TEST(LlamaTiling, RopeVisitsEachPairOnceAndNothingElse) {
  for (const RopeShape& s : kRopeShapes)
    for (int64_t cap : {int64_t{1}, int64_t{3}, tl::kElementwiseMaxBlocks}) {
      const size_t n = static_cast<size_t>(s.N) * s.stride;
      std::vector<int> first(n, 0), second(n, 0);
      const int half = s.D / 2;
      grid_stride(static_cast<size_t>(rope_pairs(s.N, s.heads, s.D)), cap, [&](size_t p) {
        const RopePair at = rope_pair(static_cast<int64_t>(p), s.T, s.heads, s.D, s.stride);
        ASSERT_GE(at.first, 0);
        ASSERT_LT(at.first + half, static_cast<int64_t>(n));
        ++first[at.first];
        ++second[at.first + half];
        // The table entry is the row's position and the pair's index.
        const int64_t row = at.first / s.stride, i = (at.first % s.stride) % s.D;
        EXPECT_EQ(at.table, (row % s.T) * half + i);
      });
      for (size_t e = 0; e < n; ++e) {
        const int64_t col = static_cast<int64_t>(e) % s.stride;
        const bool in_heads = col < int64_t{s.heads} * s.D;
        const bool low = in_heads && col % s.D < half;
        ASSERT_EQ(first[e], low ? 1 : 0) << "element " << e;
        ASSERT_EQ(second[e], in_heads && !low ? 1 : 0) << "element " << e;
      }
    }
}

TEST(LlamaTiling, RopeMatchesTheFormulas) {
  for (const RopeShape& s : kRopeShapes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " T=" << s.T << " heads=" << s.heads << " D=" << s.D);
    std::vector<float> cos, sin;
    rope_tables(s.T, s.D, cos, sin);
    const std::vector<float> x0 = randn(static_cast<size_t>(s.N) * s.stride, 1.0f, 7);
    const int half = s.D / 2;
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> x = x0;
      run_rope(x, cos, sin, s, sign, tl::kElementwiseMaxBlocks, [](float v) { return v; });
      for (int n = 0; n < s.N; ++n)
        for (int64_t col = 0; col < s.stride; ++col) {
          const size_t e = static_cast<size_t>(n) * s.stride + col;
          if (col >= int64_t{s.heads} * s.D) {
            ASSERT_EQ(x[e], x0[e]);  // past the rotated heads: untouched
            continue;
          }
          const int i = static_cast<int>(col % s.D), k = i % half;
          const size_t base = e - i;
          const double a = x0[base + k], b = x0[base + k + half];
          const double c = cos[static_cast<size_t>(n % s.T) * half + k];
          const double sn = sign * static_cast<double>(sin[static_cast<size_t>(n % s.T) * half + k]);
          const double want = i < half ? a * c - b * sn : b * c + a * sn;
          EXPECT_NEAR(x[e], want, 4 * kFp32 * (std::abs(a) + std::abs(b))) << "element " << e;
        }
    }
  }
}

// The backward is the forward's transpose: ⟨R·x, y⟩ = ⟨x, Rᵀ·y⟩ over the rotated heads.
TEST(LlamaTiling, RopeBackwardIsTheTranspose) {
  for (const RopeShape& s : kRopeShapes) {
    std::vector<float> cos, sin;
    rope_tables(s.T, s.D, cos, sin);
    const std::vector<float> x = randn(static_cast<size_t>(s.N) * s.stride, 1.0f, 8);
    const std::vector<float> y = randn(x.size(), 1.0f, 9);
    std::vector<float> rx = x, rty = y;
    run_rope(rx, cos, sin, s, 1.0f, tl::kElementwiseMaxBlocks, [](float v) { return v; });
    run_rope(rty, cos, sin, s, -1.0f, tl::kElementwiseMaxBlocks, [](float v) { return v; });
    double lhs = 0, rhs = 0, mag = 0;
    for (size_t e = 0; e < x.size(); ++e) {
      if (e % s.stride >= static_cast<size_t>(s.heads) * s.D) continue;
      lhs += static_cast<double>(rx[e]) * y[e];
      rhs += static_cast<double>(x[e]) * rty[e];
      mag += std::abs(static_cast<double>(x[e]) * y[e]);
    }
    EXPECT_NEAR(lhs, rhs, 8 * kFp32 * mag);
  }
}

// 16-bit x: computed in fp32 from the widened values, rounded once when stored.
TEST(LlamaTiling, Rope16BitRoundsOnce) {
  const RopeShape s{12, 5, 3, 64, 5 * 64};
  std::vector<float> cos, sin;
  rope_tables(s.T, s.D, cos, sin);
  std::vector<float> x0 = randn(static_cast<size_t>(s.N) * s.stride, 1.0f, 10);
  for (float& v : x0) v = round_bf16(v);
  std::vector<float> x = x0;
  run_rope(x, cos, sin, s, 1.0f, tl::kElementwiseMaxBlocks, round_bf16);
  const int half = s.D / 2;
  for (int n = 0; n < s.N; ++n)
    for (int col = 0; col < s.heads * s.D; ++col) {
      const size_t e = static_cast<size_t>(n) * s.stride + col;
      const int i = col % s.D, k = i % half;
      const size_t base = e - i;
      const double a = x0[base + k], b = x0[base + k + half];
      const double c = cos[static_cast<size_t>(n % s.T) * half + k], sn = sin[static_cast<size_t>(n % s.T) * half + k];
      const double want = i < half ? a * c - b * sn : b * c + a * sn;
      EXPECT_EQ(x[e], round_bf16(x[e])) << "stored a value that is not bf16";
      EXPECT_NEAR(x[e], want, kBf16 * std::abs(want) + 4 * kFp32 * (std::abs(a) + std::abs(b))) << "element " << e;
    }
}

// ---- SwiGLU --------------------------------------------------------------------------------------
double silu_d(double g) { return g / (1 + std::exp(-g)); }

TEST(LlamaTiling, SwigluReadsEachGateAndUpOnce) {
  for (int N : {1, 3, 17})
    for (int I : {1, 5, 64, 300}) {
      std::vector<int> gate(static_cast<size_t>(N) * 2 * I, 0), up(gate.size(), 0);
      grid_stride(static_cast<size_t>(N) * I, 2, [&](size_t e) {
        const int64_t g = swiglu_gate(static_cast<int64_t>(e), I), u = swiglu_up(static_cast<int64_t>(e), I);
        EXPECT_EQ(g, static_cast<int64_t>(e / I) * 2 * I + static_cast<int64_t>(e % I));
        EXPECT_EQ(u, g + I);
        ++gate[g];
        ++up[u];
      });
      for (size_t k = 0; k < gate.size(); ++k) {
        const bool is_gate = static_cast<int>(k % (2 * I)) < I;
        ASSERT_EQ(gate[k], is_gate ? 1 : 0);
        ASSERT_EQ(up[k], is_gate ? 0 : 1);
      }
    }
}

TEST(LlamaTiling, SwigluMatchesTheFormulasAndCentralDifferences) {
  const int N = 9, I = 37;
  const std::vector<float> inp = randn(static_cast<size_t>(N) * 2 * I, 2.0f, 11);
  const std::vector<float> dout = randn(static_cast<size_t>(N) * I, 1.0f, 12);
  std::vector<float> out(static_cast<size_t>(N) * I), dinp(inp.size(), -7.0f);  // dinp is written, not added
  grid_stride(out.size(), tl::kElementwiseMaxBlocks, [&](size_t e) {
    const int64_t g = swiglu_gate(static_cast<int64_t>(e), I);
    out[e] = swiglu_value(inp[g], inp[g + I]);
    swiglu_grads(dout[e], inp[g], inp[g + I], dinp[g], dinp[g + I]);
  });
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < I; ++i) {
      const size_t e = static_cast<size_t>(n) * I + i, g = static_cast<size_t>(n) * 2 * I + i, u = g + I;
      const double gv = inp[g], uv = inp[u], d = dout[e];
      const double want = silu_d(gv) * uv;
      EXPECT_NEAR(out[e], want, 16 * kFp32 * (std::abs(want) + std::abs(gv * uv)));
      // Central differences of d·silu(g)·u in double.
      const double h = 1e-5;
      const double dg = d * uv * (silu_d(gv + h) - silu_d(gv - h)) / (2 * h), du = d * silu_d(gv);
      EXPECT_NEAR(dinp[g], dg, 1e-6 * (1 + std::abs(d * uv)) + 16 * kFp32 * std::abs(d * uv));
      EXPECT_NEAR(dinp[u], du, 16 * kFp32 * std::abs(d * gv));
    }
}

// ---- RMSNorm -------------------------------------------------------------------------------------
// warp_sum (kernels_common.cuh) on the host: the xor butterfly 16, 8, 4, 2, 1; lane 0's value.
float warp_sum(float (&lane)[32]) {
  for (int o = 16; o > 0; o >>= 1) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ o];
    std::copy(next, next + 32, lane);
  }
  return lane[0];
}

// rmsnorm_forward_kernel and rmsnorm_backward_dinp_kernel on the host: warps of the row blocks, each
// row's lanes striding the columns; the weight gradient by rmsnorm_backward_partials_kernel's layout.
struct RmsResult {
  std::vector<float> out, rstd, dinp, dweight;
};
RmsResult run_rmsnorm(const std::vector<float>& inp, const std::vector<float>& w, const std::vector<float>& dout,
                      int N, int C, float eps, float dinp0, float dweight0) {
  RmsResult r{std::vector<float>(inp.size()), std::vector<float>(N), std::vector<float>(inp.size(), dinp0),
              std::vector<float>(C, dweight0)};
  const float inv_c = 1.0f / static_cast<float>(C);
  std::vector<int> rows_seen(N, 0);
  for (int64_t block = 0; block < tl::row_blocks(N); ++block)
    for (int warp = 0; warp < tl::rows_per_block(); ++warp) {
      const int64_t row = block * tl::rows_per_block() + warp;
      if (row >= N) continue;
      ++rows_seen[row];
      const float* x = inp.data() + row * C;
      float lanes[32] = {};
      for (int l = 0; l < 32; ++l)
        for (int c = l; c < C; c += 32) lanes[l] += x[c] * x[c];
      const float s = rmsnorm_rstd(warp_sum(lanes), inv_c, eps);
      for (int c = 0; c < C; ++c) r.out[row * C + c] = (x[c] * s) * w[c];
      r.rstd[row] = s;
      const float* d = dout.data() + row * C;
      float dn[32] = {};
      for (int l = 0; l < 32; ++l)
        for (int c = l; c < C; c += 32) dn[l] += d[c] * w[c] * (x[c] * s);
      const float mean = warp_sum(dn) * inv_c;
      for (int c = 0; c < C; ++c) r.dinp[row * C + c] += rmsnorm_dinp(d[c], w[c], x[c], s, mean);
    }
  for (int n : rows_seen) EXPECT_EQ(n, 1);
  // Column sums: per (column tile, chunk), lanes ty over the chunk's rows, lanes added in order, then the
  // chunks in order (column_partials_sum).
  const tl::ColumnLayout layout = tl::column_layout(N, C);
  std::vector<float> partial(tl::column_partials(N, C), 0.0f);
  for (int64_t k = 0; k < layout.chunks; ++k)
    for (int c = 0; c < C; ++c) {
      float lane[tl::kRowLanes] = {};
      for (int ty = 0; ty < tl::kRowLanes; ++ty)
        for (int64_t row = tl::chunk_first_row(layout, k) + ty; row < tl::chunk_end_row(layout, k, N);
             row += tl::kRowLanes)
          lane[ty] += dout[row * C + c] * (inp[row * C + c] * r.rstd[row]);
      float s = 0.0f;
      for (int ty = 0; ty < tl::kRowLanes; ++ty) s += lane[ty];
      partial[k * C + c] = s;
    }
  for (int c = 0; c < C; ++c) {
    float s = 0.0f;
    for (int64_t k = 0; k < layout.chunks; ++k) s += partial[k * C + c];
    r.dweight[c] += s;
  }
  return r;
}

// The forward in double, and the loss Σ out·dout whose gradients the backward computes.
void rms_double(const std::vector<double>& x, const std::vector<double>& w, int N, int C, double eps,
                std::vector<double>& out, std::vector<double>& rstd) {
  out.assign(x.size(), 0.0);
  rstd.assign(N, 0.0);
  for (int n = 0; n < N; ++n) {
    double sq = 0;
    for (int c = 0; c < C; ++c) sq += x[n * C + c] * x[n * C + c];
    rstd[n] = 1 / std::sqrt(sq / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = x[n * C + c] * rstd[n] * w[c];
  }
}

TEST(LlamaTiling, RmsnormMatchesTheFormulasAndCentralDifferences) {
  for (const auto& shape : {std::pair{1, 1}, std::pair{5, 33}, std::pair{40, 64}, std::pair{300, 96}}) {
    const int N = shape.first, C = shape.second;  // (no structured binding: Clang 14's lambdas cannot capture one)
    SCOPED_TRACE(::testing::Message() << "N=" << N << " C=" << C);
    const float eps = 1e-5f;
    const std::vector<float> inp = randn(static_cast<size_t>(N) * C, 1.5f, 13);
    std::vector<float> w = randn(C, 0.3f, 14);
    for (float& v : w) v += 1.0f;
    const std::vector<float> dout = randn(inp.size(), 1.0f, 15);
    const RmsResult r = run_rmsnorm(inp, w, dout, N, C, eps, 0.5f, 0.25f);
    const std::vector<double> xd(inp.begin(), inp.end()), wd(w.begin(), w.end());
    std::vector<double> out, rstd;
    rms_double(xd, wd, N, C, eps, out, rstd);
    for (int n = 0; n < N; ++n) EXPECT_NEAR(r.rstd[n], rstd[n], 8 * kFp32 * rstd[n]);
    for (size_t e = 0; e < out.size(); ++e)
      EXPECT_NEAR(r.out[e], out[e], 16 * kFp32 * (std::abs(out[e]) + std::abs(xd[e] * rstd[e / C] * wd[e % C])));
    // Gradients of Σ out·dout by central differences in double (one input at a time, a few of them).
    const double h = 1e-6;
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& ww) {
      std::vector<double> o, s;
      rms_double(x, ww, N, C, eps, o, s);
      double l = 0;
      for (size_t e = 0; e < o.size(); ++e) l += o[e] * dout[e];
      return l;
    };
    std::mt19937 pick(16);
    for (int trial = 0; trial < 20; ++trial) {
      const size_t e = pick() % inp.size();
      std::vector<double> xp = xd, xm = xd;
      xp[e] += h;
      xm[e] -= h;
      const double want = (loss(xp, wd) - loss(xm, wd)) / (2 * h);
      EXPECT_NEAR(r.dinp[e] - 0.5f, want, 1e-5 * (1 + std::abs(want) * C)) << "dinp[" << e << "]";
    }
    for (int c = 0; c < std::min(C, 20); ++c) {
      std::vector<double> wp = wd, wm = wd;
      wp[c] += h;
      wm[c] -= h;
      const double want = (loss(xd, wp) - loss(xd, wm)) / (2 * h);
      EXPECT_NEAR(r.dweight[c] - 0.25f, want, 1e-5 * (1 + std::abs(want) * std::sqrt(static_cast<double>(N))))
          << "dweight[" << c << "]";
    }
  }
}

}  // namespace
}  // namespace zerodp::cuda::llama
