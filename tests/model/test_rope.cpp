// RoPE's frequencies (model/rope.h): transformers' defaults and the llama3 scaling's three bands.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"
#include "model/rope.h"

namespace zerodp::model {
namespace {

TEST(Rope, FrequenciesAreTransformersDefaults) {
  const auto inv = rope_inv_freq(10000.0, 8, nullptr);
  ASSERT_EQ(inv.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(inv[i], std::pow(10000.0, -2.0 * i / 8), 1e-7 * inv[i]) << i;
}

TEST(Rope, Llama3ScalingKeepsHighFrequenciesAndDividesLowOnes) {
  // Llama 3.1's values: factor 8, low 1, high 4, original context 8192; head dimension 128.
  const Llama3RopeScaling s;  // the defaults
  const auto plain = rope_inv_freq(500000.0, 128, nullptr);
  const auto scaled = rope_inv_freq(500000.0, 128, &s);
  int kept = 0, divided = 0, between = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / plain[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_EQ(scaled[i], plain[i]) << i;
      ++kept;
    } else if (wavelen > 8192.0 / 1) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8) << i;
      ++divided;
    } else {
      EXPECT_LT(scaled[i], plain[i]) << i;
      EXPECT_GT(scaled[i], plain[i] / 8) << i;
      ++between;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(between, 0);
}

TEST(Rope, TablesHoldTheCosineAndSineOfEachAngle) {
  const auto inv = rope_inv_freq(10000.0, 6, nullptr);
  std::vector<float> c(5 * 3), s(5 * 3);
  rope_tables(c.data(), s.data(), inv.data(), 5, 3);
  for (int t = 0; t < 5; ++t)
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(c[t * 3 + i], std::cos(t * static_cast<double>(inv[i])), 1e-6);
      EXPECT_NEAR(s[t * 3 + i], std::sin(t * static_cast<double>(inv[i])), 1e-6);
    }
}

TEST(Rope, RefusesAnOddHeadDimension) { EXPECT_THROW(rope_inv_freq(10000.0, 7, nullptr), Error); }

}  // namespace
}  // namespace zerodp::model
