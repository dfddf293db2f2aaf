// The Llama family's element-wise kernels (RMSNorm, rotary embeddings, the SiLU-gated MLP's
// activation): their formulas against direct evaluations, their backward passes against central
// differences in double, float against double, and the 16-bit outputs within one rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

bf16 to_bf16(float x) { return bf16{fp32_to_bf16(x)}; }
float from_bf16(bf16 x) { return bf16_to_fp32(x.bits); }

// ---- RMSNorm ----------------------------------------------------------------------------------------

constexpr int kRows = 11, kWidth = 80;  // 80: one full column block of the weight reduction and a part
constexpr double kEps = 1e-6;

TEST(RMSNorm, NormalizesEachRowToUnitRootMeanSquare) {
  auto inp = random_normal(kRows * kWidth, 1, 3.0);
  const std::vector<double> ones(kWidth, 1.0);
  std::vector<double> out(kRows * kWidth), rstd(kRows);
  rmsnorm_forward(out.data(), rstd.data(), inp.data(), ones.data(), kRows, kWidth, kEps);
  for (int n = 0; n < kRows; ++n) {
    double ms = 0, oms = 0;
    for (int c = 0; c < kWidth; ++c) ms += inp[n * kWidth + c] * inp[n * kWidth + c] / kWidth;
    for (int c = 0; c < kWidth; ++c) oms += out[n * kWidth + c] * out[n * kWidth + c] / kWidth;
    EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(ms + kEps), 1e-12) << n;
    EXPECT_NEAR(oms, ms / (ms + kEps), 1e-12) << n;
  }
}

TEST(RMSNorm, GradientMatchesFiniteDifferences) {
  auto inp = random_normal(kRows * kWidth, 2, 2.0), weight = random_normal(kWidth, 3),
       dout = random_normal(kRows * kWidth, 4);
  std::vector<double> out(kRows * kWidth), rstd(kRows);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), kRows, kWidth, kEps);
    return testing::dot(dout, out);
  };
  loss();
  std::vector<double> dinp(kRows * kWidth, 0.0), dweight(kWidth, 0.0);
  rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), kRows, kWidth);
  testing::expect_gradients_match(loss, {{"inp", &inp, &dinp}, {"weight", &weight, &dweight}});
  // Backward accumulates: a second call doubles both gradients.
  const auto once_x = dinp, once_w = dweight;
  rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), kRows, kWidth);
  for (size_t i = 0; i < dinp.size(); ++i) ASSERT_DOUBLE_EQ(dinp[i], 2 * once_x[i]);
  for (size_t i = 0; i < dweight.size(); ++i) ASSERT_DOUBLE_EQ(dweight[i], 2 * once_w[i]);
}

TEST(RMSNorm, FloatAndBf16AgreeWithDouble) {
  const auto inp = random_normal(kRows * kWidth, 5, 2.0), weight = random_normal(kWidth, 6);
  std::vector<double> out(kRows * kWidth), rstd(kRows);
  rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), kRows, kWidth, kEps);
  const auto inp_f = as<float>(inp), weight_f = as<float>(weight);
  std::vector<float> out_f(kRows * kWidth), rstd_f(kRows);
  rmsnorm_forward(out_f.data(), rstd_f.data(), inp_f.data(), weight_f.data(), kRows, kWidth, kEps);
  testing::expect_close_scaled(out_f, out, 1e-6, "fp32 output");
  // bf16 weights and output: the weight's rounding and the output's, each 2^-9 relative at most.
  std::vector<bf16> weight_b(kWidth), out_b(kRows * kWidth);
  std::vector<double> weight_rounded(kWidth);
  for (int c = 0; c < kWidth; ++c) {
    weight_b[c] = to_bf16(weight_f[c]);
    weight_rounded[c] = from_bf16(weight_b[c]);
  }
  rmsnorm_forward(out_b.data(), rstd_f.data(), inp_f.data(), weight_b.data(), kRows, kWidth, kEps);
  std::vector<double> want(kRows * kWidth);
  rmsnorm_forward(want.data(), rstd.data(), inp.data(), weight_rounded.data(), kRows, kWidth, kEps);
  std::vector<double> got(out_b.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = from_bf16(out_b[i]);
  testing::expect_close_elementwise(got, want, std::ldexp(1.0, -8), "bf16 output");
}

// ---- rotary embeddings --------------------------------------------------------------------------------

struct RopeCase {
  static constexpr int B = 2, T = 5, H = 3, D = 8, half = D / 2;
  static constexpr int64_t stride = H * D + 7;  // rows wider than the heads (q beside k and v)
  std::vector<double> inv = std::vector<double>(half);
  std::vector<float> cos = std::vector<float>(T * half), sin = std::vector<float>(T * half);
  RopeCase() {  // theta 100 (model/rope.h makes the real tables)
    for (int i = 0; i < half; ++i) inv[i] = std::pow(100.0, -2.0 * i / D);
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < half; ++i) {
        cos[t * half + i] = static_cast<float>(std::cos(t * inv[i]));
        sin[t * half + i] = static_cast<float>(std::sin(t * inv[i]));
      }
  }
};

TEST(Rope, RotatesEachPairByItsPositionsAngle) {
  const RopeCase k;
  const int N = RopeCase::B * RopeCase::T;
  const auto inp = random_normal(N * RopeCase::stride, 7);
  std::vector<double> out = inp;
  rope_forward(out.data(), inp.data(), k.cos.data(), k.sin.data(), nullptr, N, RopeCase::T, RopeCase::H, RopeCase::D,
               RopeCase::stride);
  for (int n = 0; n < N; ++n) {
    const int t = n % RopeCase::T;
    for (int h = 0; h < RopeCase::H; ++h)
      for (int i = 0; i < RopeCase::half; ++i) {
        const size_t a = n * RopeCase::stride + h * RopeCase::D + i, b = a + RopeCase::half;
        const double angle = t * k.inv[i];
        EXPECT_NEAR(out[a], inp[a] * std::cos(angle) - inp[b] * std::sin(angle), 1e-5) << n << " " << h << " " << i;
        EXPECT_NEAR(out[b], inp[b] * std::cos(angle) + inp[a] * std::sin(angle), 1e-5) << n << " " << h << " " << i;
      }
    // The columns past the heads are not touched.
    for (int64_t c = RopeCase::H * RopeCase::D; c < RopeCase::stride; ++c)
      EXPECT_EQ(out[n * RopeCase::stride + c], inp[n * RopeCase::stride + c]);
  }
}

TEST(Rope, BackwardIsTheTransposeAndWorksInPlace) {
  const RopeCase k;
  const int N = RopeCase::B * RopeCase::T;
  auto inp = random_normal(N * RopeCase::stride, 8);
  const auto dout = random_normal(N * RopeCase::stride, 9);
  std::vector<double> out(inp.size());
  auto loss = [&] {
    out = inp;
    rope_forward(out.data(), inp.data(), k.cos.data(), k.sin.data(), nullptr, N, RopeCase::T, RopeCase::H, RopeCase::D,
                 RopeCase::stride);
    double l = 0;  // over the rotated heads only
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < RopeCase::H * RopeCase::D; ++c) l += dout[n * RopeCase::stride + c] * out[n * RopeCase::stride + c];
    return l;
  };
  std::vector<double> dinp = dout;  // in place
  rope_backward(dinp.data(), dinp.data(), k.cos.data(), k.sin.data(), nullptr, N, RopeCase::T, RopeCase::H, RopeCase::D,
                RopeCase::stride);
  for (int n = 0; n < N; ++n)  // the loss does not see the other columns
    for (int64_t c = RopeCase::H * RopeCase::D; c < RopeCase::stride; ++c) dinp[n * RopeCase::stride + c] = 0;
  testing::expect_gradients_match(loss, {{"inp", &inp, &dinp}});
}

TEST(Rope, RefusesABadShape) {
  std::vector<float> x(16), t(8);
  EXPECT_THROW(rope_forward(x.data(), x.data(), t.data(), t.data(), nullptr, 1, 1, 2, 8, 15),
               Error);  // stride < heads·D
}

// ---- SwiGLU ---------------------------------------------------------------------------------------------

constexpr int kTokens = 9, kHidden = 21;

TEST(SwiGLU, IsSiluOfTheGateTimesUp) {
  const auto inp = random_normal(kTokens * 2 * kHidden, 10, 3.0);
  std::vector<double> out(kTokens * kHidden);
  swiglu_forward(out.data(), inp.data(), kTokens, kHidden);
  for (int n = 0; n < kTokens; ++n)
    for (int i = 0; i < kHidden; ++i) {
      const double g = inp[n * 2 * kHidden + i], u = inp[n * 2 * kHidden + kHidden + i];
      EXPECT_NEAR(out[n * kHidden + i], g / (1 + std::exp(-g)) * u, 1e-12);
    }
}

TEST(SwiGLU, GradientMatchesFiniteDifferences) {
  auto inp = random_normal(kTokens * 2 * kHidden, 11, 2.0);
  const auto dout = random_normal(kTokens * kHidden, 12);
  std::vector<double> out(kTokens * kHidden);
  auto loss = [&] {
    swiglu_forward(out.data(), inp.data(), kTokens, kHidden);
    return testing::dot(dout, out);
  };
  std::vector<double> dinp(inp.size(), 99.0);  // written, not accumulated
  swiglu_backward(dinp.data(), dout.data(), inp.data(), kTokens, kHidden);
  testing::expect_gradients_match(loss, {{"inp", &inp, &dinp}});
}

TEST(SwiGLU, Bf16InputsGiveTheRoundedFloatResult) {
  const auto inp = random_normal(kTokens * 2 * kHidden, 13, 2.0);
  std::vector<bf16> inp_b(inp.size());
  std::vector<float> inp_f(inp.size());
  for (size_t i = 0; i < inp.size(); ++i) {
    inp_b[i] = to_bf16(static_cast<float>(inp[i]));
    inp_f[i] = from_bf16(inp_b[i]);
  }
  std::vector<bf16> out_b(kTokens * kHidden);
  std::vector<float> out_f(kTokens * kHidden);
  swiglu_forward(out_b.data(), inp_b.data(), kTokens, kHidden);
  swiglu_forward(out_f.data(), inp_f.data(), kTokens, kHidden);
  for (size_t i = 0; i < out_f.size(); ++i) EXPECT_EQ(out_b[i].bits, to_bf16(out_f[i]).bits) << i;
}

}  // namespace
}  // namespace zerodp::kernels
