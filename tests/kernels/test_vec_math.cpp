#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/vec_math.h"

namespace zerodp::kernels::detail {
namespace {

TEST(VecMath, FastExpIsAccurateOverTheFloatRange) {
  double worst = 0;
  for (int i = -87000; i <= 88000; ++i) {
    const float x = i * 1e-3f + 1.37e-4f;  // off the grid of round numbers
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(fast_exp(x) - want) / want);
  }
  EXPECT_LT(worst, 1.5e-7);  // 2.5 ulp; 7.8e-8 measured on a 1e-5 grid
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(VecMath, FastExpSaturatesAndPropagatesNan) {
  EXPECT_LT(fast_exp(-1000.0f), 2e-38f);
  EXPECT_GE(fast_exp(-1000.0f), 0.0f);
  EXPECT_LT(fast_exp(-std::numeric_limits<float>::infinity()), 2e-38f);
  EXPECT_TRUE(std::isfinite(fast_exp(1000.0f)));
  EXPECT_GT(fast_exp(1000.0f), 1e38f);
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(VecMath, FastTanhIsAccurateAndExactAtTheLimits) {
  for (int i = -20000; i <= 20000; ++i) {
    const float u = i * 1e-3f;
    // 1.8e-7 measured on a 1e-5 grid: the rounding of 1 − 2/(e + 1) near |tanh| = 1.
    ASSERT_NEAR(fast_tanh(u), std::tanh(static_cast<double>(u)), 2e-7) << u;
  }
  EXPECT_EQ(fast_tanh(50.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-50.0f), -1.0f);
  EXPECT_EQ(fast_tanh(std::numeric_limits<float>::infinity()), 1.0f);
}

TEST(VecMath, ExpShiftedSumsTheRowAndMayWorkInPlace) {
  std::vector<float> x(50257);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * i) * 5.0);
  const float m = row_max(x.data(), static_cast<int>(x.size()));
  double want = 0;
  for (float v : x) want += std::exp(static_cast<double>(v) - m);
  const double sum = exp_shifted(x.data(), x.data(), static_cast<int>(x.size()), m);
  EXPECT_NEAR(sum / want, 1.0, 1e-6);
  EXPECT_EQ(row_max(x.data(), static_cast<int>(x.size())), 1.0f);  // the max became e^0
}

}  // namespace
}  // namespace zerodp::kernels::detail
