#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

constexpr int kN = 14, kC = 24, kOC = 37;

TEST(Matmul, ForwardMatchesNaiveProduct) {
  const auto inp = random_normal(kN * kC, 1), weight = random_normal(kC * kOC, 2),
             bias = random_normal(kOC, 3);
  std::vector<double> out(kN * kOC, -7.0), out_nobias(kN * kOC, -7.0);
  matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), kN, kC, kOC);
  matmul_forward(out_nobias.data(), inp.data(), weight.data(), static_cast<const double*>(nullptr), kN,
                 kC, kOC);
  std::vector<double> want(kN * kOC), want_nobias(kN * kOC);
  for (int n = 0; n < kN; ++n)
    for (int o = 0; o < kOC; ++o) {
      double s = 0;
      for (int c = 0; c < kC; ++c) s += inp[n * kC + c] * weight[c * kOC + o];
      want_nobias[n * kOC + o] = s;
      want[n * kOC + o] = s + bias[o];
    }
  testing::expect_close_scaled(out, want, 1e-14, "with bias");
  testing::expect_close_scaled(out_nobias, want_nobias, 1e-14, "without bias (out overwritten)");
}

TEST(Matmul, LmHeadForwardMatchesNaiveProduct) {
  const int V = kOC;
  const auto inp = random_normal(kN * kC, 1), wte = random_normal(V * kC, 2);
  std::vector<double> out(kN * V, -7.0), want(kN * V);
  matmul_nt_forward(out.data(), inp.data(), wte.data(), kN, kC, V);
  for (int n = 0; n < kN; ++n)
    for (int v = 0; v < V; ++v) {
      double s = 0;
      for (int c = 0; c < kC; ++c) s += inp[n * kC + c] * wte[v * kC + c];
      want[n * V + v] = s;
    }
  testing::expect_close_scaled(out, want, 1e-14, "logits");
}

TEST(Matmul, GradientMatchesFiniteDifferences) {
  auto inp = random_normal(kN * kC, 1), weight = random_normal(kC * kOC, 2), bias = random_normal(kOC, 3);
  const auto dout = random_normal(kN * kOC, 4);
  std::vector<double> out(kN * kOC);
  auto loss = [&] {
    matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), kN, kC, kOC);
    return testing::dot(dout, out);
  };
  std::vector<double> dinp(inp.size(), 0.0), dweight(weight.size(), 0.0), dbias(kOC, 0.0);
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), kN,
                  kC, kOC);
  testing::expect_gradients_match(
      loss, {{"inp", &inp, &dinp}, {"weight", &weight, &dweight}, {"bias", &bias, &dbias}});
}

TEST(Matmul, LmHeadGradientMatchesFiniteDifferences) {
  const int V = kOC;
  auto inp = random_normal(kN * kC, 1), wte = random_normal(V * kC, 2);
  const auto dout = random_normal(kN * V, 4);
  std::vector<double> out(kN * V);
  auto loss = [&] {
    matmul_nt_forward(out.data(), inp.data(), wte.data(), kN, kC, V);
    return testing::dot(dout, out);
  };
  std::vector<double> dinp(inp.size(), 0.0), dwte(wte.size(), 0.0);
  matmul_nt_backward(dinp.data(), dwte.data(), dout.data(), inp.data(), wte.data(), kN, kC, V);
  testing::expect_gradients_match(loss, {{"inp", &inp, &dinp}, {"wte", &wte, &dwte}});
}

// The input's gradient is written (whatever the buffer held), the parameters' accumulate.
TEST(Matmul, BackwardWritesDinpAccumulatesParamsAndSkipsNullGradients) {
  const auto inp = random_normal(kN * kC, 1), weight = random_normal(kC * kOC, 2);
  const auto dout = random_normal(kN * kOC, 4);
  std::vector<double> dinp(kN * kC, 0.0), dweight(kC * kOC, 0.0), dbias(kOC, 0.0);
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), kN,
                  kC, kOC);

  auto dinp2 = random_normal(kN * kC, 5), dweight2 = random_normal(kC * kOC, 6),
       dbias2 = random_normal(kOC, 7);
  auto want_inp = dinp, want_weight = dweight2, want_bias = dbias2;
  for (size_t i = 0; i < dweight.size(); ++i) want_weight[i] += dweight[i];
  for (size_t i = 0; i < dbias.size(); ++i) want_bias[i] += dbias[i];
  matmul_backward(dinp2.data(), dweight2.data(), dbias2.data(), dout.data(), inp.data(), weight.data(),
                  kN, kC, kOC);
  EXPECT_EQ(dinp2, want_inp) << "dinp is written";
  testing::expect_close_scaled(dweight2, want_weight, 1e-14, "dweight accumulates");
  testing::expect_close_scaled(dbias2, want_bias, 1e-14, "dbias accumulates");

  std::vector<double> dweight3(kC * kOC, 0.0);
  matmul_backward(static_cast<double*>(nullptr), dweight3.data(), static_cast<double*>(nullptr),
                  dout.data(), inp.data(), weight.data(), kN, kC, kOC);
  testing::expect_close_scaled(dweight3, dweight, 1e-14, "dweight alone");
}

TEST(Matmul, LmHeadBackwardWritesDinpAccumulatesWte) {
  const int V = kOC;
  const auto inp = random_normal(kN * kC, 1), wte = random_normal(V * kC, 2);
  const auto dout = random_normal(kN * V, 4);
  std::vector<double> dinp(kN * kC, 0.0), dwte(V * kC, 0.0);
  matmul_nt_backward(dinp.data(), dwte.data(), dout.data(), inp.data(), wte.data(), kN, kC, V);
  auto dinp2 = random_normal(kN * kC, 5), dwte2 = random_normal(V * kC, 6);
  auto want_inp = dinp, want_wte = dwte2;
  for (size_t i = 0; i < dwte.size(); ++i) want_wte[i] += dwte[i];
  matmul_nt_backward(dinp2.data(), dwte2.data(), dout.data(), inp.data(), wte.data(), kN, kC, V);
  EXPECT_EQ(dinp2, want_inp) << "dinp is written";
  testing::expect_close_scaled(dwte2, want_wte, 1e-14, "dwte accumulates");
}

TEST(Matmul, FloatAgreesWithDouble) {
  const auto inp = random_normal(kN * kC, 1), weight = random_normal(kC * kOC, 2),
             bias = random_normal(kOC, 3), dout = random_normal(kN * kOC, 4);
  std::vector<double> out(kN * kOC), dinp(kN * kC, 0.0), dweight(kC * kOC, 0.0), dbias(kOC, 0.0);
  matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), kN, kC, kOC);
  matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), kN,
                  kC, kOC);
  const auto inp_f = as<float>(inp), weight_f = as<float>(weight), bias_f = as<float>(bias),
             dout_f = as<float>(dout);
  std::vector<float> out_f(kN * kOC), dinp_f(kN * kC, 0.0f), dweight_f(kC * kOC, 0.0f),
      dbias_f(kOC, 0.0f);
  matmul_forward(out_f.data(), inp_f.data(), weight_f.data(), bias_f.data(), kN, kC, kOC);
  matmul_backward(dinp_f.data(), dweight_f.data(), dbias_f.data(), dout_f.data(), inp_f.data(),
                  weight_f.data(), kN, kC, kOC);
  testing::expect_close_scaled(out_f, out, 1e-5, "out");
  testing::expect_close_scaled(dinp_f, dinp, 1e-5, "dinp");
  testing::expect_close_scaled(dweight_f, dweight, 1e-5, "dweight");
  testing::expect_close_scaled(dbias_f, dbias, 1e-5, "dbias");

  const int V = kOC;
  const auto& wte = weight;  // any [V,C] = [37,24] matrix: reuse the values
  const auto& wte_f = weight_f;
  std::vector<double> logits(kN * V), dinp_h(kN * kC, 0.0), dwte(V * kC, 0.0);
  matmul_nt_forward(logits.data(), inp.data(), wte.data(), kN, kC, V);
  matmul_nt_backward(dinp_h.data(), dwte.data(), dout.data(), inp.data(), wte.data(), kN, kC, V);
  std::vector<float> logits_f(kN * V), dinp_hf(kN * kC, 0.0f), dwte_f(V * kC, 0.0f);
  matmul_nt_forward(logits_f.data(), inp_f.data(), wte_f.data(), kN, kC, V);
  matmul_nt_backward(dinp_hf.data(), dwte_f.data(), dout_f.data(), inp_f.data(), wte_f.data(), kN, kC,
                     V);
  testing::expect_close_scaled(logits_f, logits, 1e-5, "logits");
  testing::expect_close_scaled(dinp_hf, dinp_h, 1e-5, "head dinp");
  testing::expect_close_scaled(dwte_f, dwte, 1e-5, "head dwte");
}

}  // namespace
}  // namespace zerodp::kernels
