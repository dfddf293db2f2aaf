// Stochastic rounding to bf16 (core/stochastic_round.h): exact where bf16 is, one of the two
// neighbours otherwise with the expected value the fp32 number, the specials kept, and the draws a
// function of (stream, index) alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/stochastic_round.h"

namespace zerodp {
namespace stochastic_round_test {

float round_one(float x, uint64_t stream, uint64_t index) {
  uint16_t out;
  round_bf16_stochastic(&x, &out, 1, stream, index);
  return bf16_to_fp32(out);
}

TEST(StochasticRound, ExactWhereBf16IsExact) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 3.0e38f, 1e-40f})
    for (uint64_t i = 0; i < 64; ++i) {
      const float exact = bf16_to_fp32(fp32_to_bf16(x));
      if (exact != x) continue;  // not representable: not this test's
      EXPECT_EQ(float_bits(round_one(x, 7, i)), float_bits(x)) << x;
    }
}

TEST(StochasticRound, OneOfTheNeighboursWithTheRightMean) {
  // 1 + 2^-10: a quarter of the way from 1 to the next bf16 (1 + 2^-7 · ... in steps of 2^-7).
  for (float x : {1.0f + 0x1p-9f, -3.3333333f, 1234.567f, 1e-20f}) {
    const float down = bf16_to_fp32(static_cast<uint16_t>(float_bits(x) >> 16));
    const float up = bf16_to_fp32(static_cast<uint16_t>((float_bits(x) >> 16) + 1));
    const size_t n = 200000;
    std::vector<float> xs(n, x);
    std::vector<uint16_t> out(n);
    round_bf16_stochastic(xs.data(), out.data(), n, 42, 1000);
    double sum = 0;
    size_t ups = 0;
    for (uint16_t h : out) {
      const float y = bf16_to_fp32(h);
      ASSERT_TRUE(y == down || y == up) << x << " -> " << y;
      ups += y == up;
      sum += y;
    }
    const double p = (static_cast<double>(x) - down) / (static_cast<double>(up) - down);
    // Binomial: the fraction rounded up within 5 standard deviations of p, and the mean near x.
    const double sd = std::sqrt(p * (1 - p) / static_cast<double>(n));
    EXPECT_NEAR(static_cast<double>(ups) / n, p, 5 * sd + 1e-9) << x;
    EXPECT_NEAR(sum / n, x, (5 * sd + 1e-9) * std::abs(static_cast<double>(up) - down)) << x;
  }
}

TEST(StochasticRound, SpecialsKept) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(round_one(inf, 1, 2), inf);
  EXPECT_EQ(round_one(-inf, 1, 2), -inf);
  EXPECT_TRUE(std::isnan(round_one(nan, 1, 2)));
  // A NaN whose payload lies only in the dropped bits stays a NaN.
  EXPECT_TRUE(std::isnan(round_one(bits_float(0x7F800001u), 1, 2)));
}

TEST(StochasticRound, DrawsDependOnStreamAndIndexOnly) {
  const size_t n = 1000;
  std::vector<float> xs(n);
  for (size_t i = 0; i < n; ++i) xs[i] = 1.0f + static_cast<float>(i) * 1e-5f;
  std::vector<uint16_t> whole(n), pieces(n), other(n);
  round_bf16_stochastic(xs.data(), whole.data(), n, 99, 5000);
  // In two pieces, the second starting at its own index: the same bits.
  round_bf16_stochastic(xs.data(), pieces.data(), 300, 99, 5000);
  round_bf16_stochastic(xs.data() + 300, pieces.data() + 300, n - 300, 99, 5300);
  EXPECT_EQ(whole, pieces);
  round_bf16_stochastic(xs.data(), other.data(), n, rounding_stream(99, 1, 0, 0), 5000);
  EXPECT_NE(whole, other);
}

}  // namespace stochastic_round_test
}  // namespace zerodp
