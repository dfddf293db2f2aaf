#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/gelu.h"

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

}  // namespace
}  // namespace zerodp::kernels
