#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "core/dtype.h"
#include "kernels/gelu.h"
#include "kernels/matmul.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

double gelu_reference(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, FloatMatchesTheFormulaAcrossItsRange) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(i * 0.0025f);  // [-10, 10]
  for (float big : {30.0f, 1e4f, 1e30f}) {
    x.push_back(big);
    x.push_back(-big);
  }
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = gelu_reference(x[i]);
    // fast_tanh is accurate to ~1e-7 absolute; GELU multiplies it by x/2.
    ASSERT_NEAR(y[i], want, 4e-7 * std::max(1.0, std::abs(want))) << "x = " << x[i];
  }
  EXPECT_EQ(y[4000], 0.0f);  // gelu(0)
  EXPECT_EQ(y[x.size() - 2], 1e30f);
  EXPECT_EQ(y[x.size() - 1], 0.0f);
}

TEST(Gelu, NanPropagates) {
  const float x[2] = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  float y[2];
  gelu_forward(y, x, 2);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_FALSE(std::isnan(y[1]));
}

TEST(Gelu, GradientMatchesFiniteDifferences) {
  const size_t n = 101;
  auto inp = random_normal(n, 1, 2.0);
  const auto dout = random_normal(n, 2);
  std::vector<double> out(n);
  auto loss = [&] {
    gelu_forward(out.data(), inp.data(), n);
    return testing::dot(dout, out);
  };
  std::vector<double> dinp(n, 0.0);
  gelu_backward(dinp.data(), inp.data(), dout.data(), n);
  testing::expect_gradients_match(loss, {{"inp", &inp, &dinp}});
}

TEST(Gelu, BackwardWritesAndFloatAgreesWithDouble) {
  const size_t n = 1001;
  const auto inp = random_normal(n, 3, 3.0), dout = random_normal(n, 4);
  std::vector<double> out(n), dinp(n, 0.0);
  gelu_forward(out.data(), inp.data(), n);
  gelu_backward(dinp.data(), inp.data(), dout.data(), n);

  auto over = random_normal(n, 5);  // whatever the buffer held is replaced
  gelu_backward(over.data(), inp.data(), dout.data(), n);
  EXPECT_EQ(over, dinp) << "dinp is written";
  auto in_place = dout;  // dinp may be dout itself
  gelu_backward(in_place.data(), inp.data(), in_place.data(), n);
  EXPECT_EQ(in_place, dinp) << "dinp over dout";

  const auto inp_f = as<float>(inp), dout_f = as<float>(dout);
  std::vector<float> out_f(n), dinp_f(n, 0.0f);
  gelu_forward(out_f.data(), inp_f.data(), n);
  gelu_backward(dinp_f.data(), inp_f.data(), dout_f.data(), n);
  testing::expect_close_scaled(out_f, out, 1e-6, "out");
  testing::expect_close_scaled(dinp_f, dinp, 1e-6, "dinp");
}


// The fused GELU backward + bias gradient is the two kernels it replaces, bit for bit: the model's
// fp32 results must not change when it uses it. OC = 200 leaves a partial column block.
template <class T>
void expect_fused_bias_backward_is_exact() {
  const int N = 37, OC = 200;
  const size_t n = static_cast<size_t>(N) * OC;
  const auto pre = as<T>(random_normal(n, 6, 2.0)), dout = as<T>(random_normal(n, 7));
  const auto bias0 = as<T>(random_normal(OC, 8));  // the bias gradient accumulates
  std::vector<T> want_d(n), want_b = bias0;
  gelu_backward(want_d.data(), pre.data(), dout.data(), n);
  bias_backward(want_b.data(), want_d.data(), N, OC);

  std::vector<T> got_d = as<T>(random_normal(n, 9)), got_b = bias0;  // dpre is written over garbage
  gelu_bias_backward(got_d.data(), got_b.data(), pre.data(), dout.data(), N, OC);
  EXPECT_EQ(got_d, want_d);
  EXPECT_EQ(got_b, want_b);
  std::vector<T> in_place = dout, in_place_b = bias0;  // dpre over dout, as the model calls it
  gelu_bias_backward(in_place.data(), in_place_b.data(), pre.data(), in_place.data(), N, OC);
  EXPECT_EQ(in_place, want_d);
  EXPECT_EQ(in_place_b, want_b);
}

TEST(Gelu, FusedBiasBackwardIsGeluThenBiasBackwardBitwise) {
  expect_fused_bias_backward_is_exact<float>();
  expect_fused_bias_backward_is_exact<double>();
}

// 16-bit: the operand is the rounded fp32 gradient, and the bias sums the unrounded one.
template <class A>
void expect_fused_round_bias_backward_is_exact() {
  const int N = 37, OC = 200;
  const size_t n = static_cast<size_t>(N) * OC;
  const auto pre32 = as<float>(random_normal(n, 10, 2.0)), dout = as<float>(random_normal(n, 11));
  std::vector<A> pre(n);
  round_to(pre.data(), pre32.data(), n);
  const auto bias0 = as<float>(random_normal(OC, 12));
  std::vector<float> d32(n), want_b = bias0;
  gelu_backward(d32.data(), pre.data(), dout.data(), n);
  bias_backward(want_b.data(), d32.data(), N, OC);
  std::vector<A> want16(n);
  round_to(want16.data(), d32.data(), n);

  std::vector<A> got16(n);
  std::vector<float> got_b = bias0;
  gelu_round_bias_backward(got16.data(), got_b.data(), pre.data(), dout.data(), N, OC);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(got16[i].bits, want16[i].bits) << "element " << i;
  EXPECT_EQ(got_b, want_b);
}

TEST(Gelu, FusedRoundBiasBackwardIsGeluRoundAndBiasBitwise) {
  expect_fused_round_bias_backward_is_exact<bf16>();
  expect_fused_round_bias_backward_is_exact<fp16>();
}

}  // namespace
}  // namespace zerodp::kernels
