#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/layernorm.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

constexpr int kN = 13, kC = 24;

TEST(LayerNorm, UnitAffineGivesZeroMeanAndUnitVariance) {
  auto inp = random_normal(kN * kC, 1, 3.0);
  for (int n = 0; n < kN; ++n)
    for (int c = 0; c < kC; ++c) inp[n * kC + c] += n - 6.0;  // rows with different means
  const std::vector<double> ones(kC, 1.0), zeros(kC, 0.0);
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), ones.data(), zeros.data(), kN, kC);
  for (int n = 0; n < kN; ++n) {
    double m = 0, v = 0, om = 0, ov = 0;
    for (int c = 0; c < kC; ++c) m += inp[n * kC + c] / kC;
    for (int c = 0; c < kC; ++c) v += (inp[n * kC + c] - m) * (inp[n * kC + c] - m) / kC;
    for (int c = 0; c < kC; ++c) om += out[n * kC + c] / kC;
    for (int c = 0; c < kC; ++c) ov += out[n * kC + c] * out[n * kC + c] / kC;
    EXPECT_NEAR(mean[n], m, 1e-12) << n;
    EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(v + 1e-5), 1e-12) << n;
    EXPECT_NEAR(om, 0.0, 1e-12) << n;
    EXPECT_NEAR(ov, v / (v + 1e-5), 1e-12) << n;  // eps shrinks the variance a little, exactly so
  }
}

TEST(LayerNorm, FloatIsAccurateOnRowsWithALargeMean) {
  // The two-pass variance keeps float accurate where E[x²] − μ² would cancel.
  auto inp = random_normal(kN * kC, 2);
  for (double& x : inp) x += 1000.0;
  const std::vector<double> ones(kC, 1.0), zeros(kC, 0.0);
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), ones.data(), zeros.data(), kN, kC);
  const auto inp_f = as<float>(inp), ones_f = as<float>(ones), zeros_f = as<float>(zeros);
  std::vector<float> out_f(kN * kC), mean_f(kN), rstd_f(kN);
  layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), inp_f.data(), ones_f.data(),
                    zeros_f.data(), kN, kC);
  // Input rounding alone is 1000·6e-8 = 6e-5 absolute on values of spread 1.
  testing::expect_close_scaled(out_f, out, 1e-3, "normalized output");
}

struct LayerNormCase {
  std::vector<double> inp = random_normal(kN * kC, 1, 2.0);
  std::vector<double> weight = random_normal(kC, 2);
  std::vector<double> bias = random_normal(kC, 3);
  std::vector<double> dout = random_normal(kN * kC, 4);
};

TEST(LayerNorm, GradientMatchesFiniteDifferences) {
  LayerNormCase k;
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  auto loss = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), k.inp.data(), k.weight.data(),
                      k.bias.data(), kN, kC);
    return testing::dot(k.dout, out);
  };
  loss();
  std::vector<double> dinp(kN * kC, 0.0), dweight(kC, 0.0), dbias(kC, 0.0);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), k.dout.data(), k.inp.data(),
                     k.weight.data(), mean.data(), rstd.data(), kN, kC);
  testing::expect_gradients_match(
      loss, {{"inp", &k.inp, &dinp}, {"weight", &k.weight, &dweight}, {"bias", &k.bias, &dbias}});
}

TEST(LayerNorm, BackwardAccumulates) {
  LayerNormCase k;
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), k.inp.data(), k.weight.data(), k.bias.data(),
                    kN, kC);
  std::vector<double> dinp(kN * kC, 0.0), dweight(kC, 0.0), dbias(kC, 0.0);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), k.dout.data(), k.inp.data(),
                     k.weight.data(), mean.data(), rstd.data(), kN, kC);
  // Twice from zero gives twice the gradient.
  std::vector<double> dinp2(kN * kC, 0.0), dweight2(kC, 0.0), dbias2(kC, 0.0);
  for (int rep = 0; rep < 2; ++rep)
    layernorm_backward(dinp2.data(), dweight2.data(), dbias2.data(), k.dout.data(), k.inp.data(),
                       k.weight.data(), mean.data(), rstd.data(), kN, kC);
  for (double& g : dinp) g *= 2;
  for (double& g : dweight) g *= 2;
  for (double& g : dbias) g *= 2;
  testing::expect_close_scaled(dinp2, dinp, 1e-14, "dinp");
  testing::expect_close_scaled(dweight2, dweight, 1e-14, "dweight");
  testing::expect_close_scaled(dbias2, dbias, 1e-14, "dbias");
}

TEST(LayerNorm, FloatAgreesWithDouble) {
  LayerNormCase k;
  std::vector<double> out(kN * kC), mean(kN), rstd(kN);
  layernorm_forward(out.data(), mean.data(), rstd.data(), k.inp.data(), k.weight.data(), k.bias.data(),
                    kN, kC);
  std::vector<double> dinp(kN * kC, 0.0), dweight(kC, 0.0), dbias(kC, 0.0);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), k.dout.data(), k.inp.data(),
                     k.weight.data(), mean.data(), rstd.data(), kN, kC);

  const auto inp = as<float>(k.inp), weight = as<float>(k.weight), bias = as<float>(k.bias),
             dout = as<float>(k.dout);
  std::vector<float> out_f(kN * kC), mean_f(kN), rstd_f(kN);
  layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), inp.data(), weight.data(), bias.data(),
                    kN, kC);
  std::vector<float> dinp_f(kN * kC, 0.0f), dweight_f(kC, 0.0f), dbias_f(kC, 0.0f);
  layernorm_backward(dinp_f.data(), dweight_f.data(), dbias_f.data(), dout.data(), inp.data(),
                     weight.data(), mean_f.data(), rstd_f.data(), kN, kC);
  // Float carries ~6e-8 relative per operation; over sums of 24 terms the error stays near 1e-6.
  testing::expect_close_scaled(out_f, out, 1e-5, "out");
  testing::expect_close_scaled(mean_f, mean, 1e-5, "mean");
  testing::expect_close_scaled(rstd_f, rstd, 1e-5, "rstd");
  testing::expect_close_scaled(dinp_f, dinp, 1e-5, "dinp");
  testing::expect_close_scaled(dweight_f, dweight, 1e-5, "dweight");
  testing::expect_close_scaled(dbias_f, dbias, 1e-5, "dbias");
}

}  // namespace
}  // namespace zerodp::kernels
