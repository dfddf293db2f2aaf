#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/residual.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

constexpr size_t kN = 1003;

TEST(Residual, ForwardAddsAndMayWorkInPlace) {
  const auto a = as<float>(random_normal(kN, 1)), b = as<float>(random_normal(kN, 2));
  std::vector<float> out(kN);
  residual_forward(out.data(), a.data(), b.data(), kN);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(out[i], a[i] + b[i]);
  std::vector<float> x = a;  // x += b, the way a residual stream is updated
  residual_forward(x.data(), x.data(), b.data(), kN);
  EXPECT_EQ(x, out);
}

TEST(Residual, GradientMatchesFiniteDifferences) {
  auto a = random_normal(kN, 1), b = random_normal(kN, 2);
  const auto dout = random_normal(kN, 3);
  std::vector<double> out(kN);
  auto loss = [&] {
    residual_forward(out.data(), a.data(), b.data(), kN);
    return testing::dot(dout, out);
  };
  std::vector<double> da(kN, 0.0), db(kN, 0.0);
  residual_backward(da.data(), db.data(), dout.data(), kN);
  testing::expect_gradients_match(loss, {{"a", &a, &da}, {"b", &b, &db}}, 1e-6, 200);
}

TEST(Residual, BackwardAccumulates) {
  const auto dout = as<float>(random_normal(kN, 3));
  const auto da0 = as<float>(random_normal(kN, 4)), db0 = as<float>(random_normal(kN, 5));
  std::vector<float> da = da0, db = db0;
  residual_backward(da.data(), db.data(), dout.data(), kN);
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_EQ(da[i], da0[i] + dout[i]);
    ASSERT_EQ(db[i], db0[i] + dout[i]);
  }
}

}  // namespace
}  // namespace zerodp::kernels
