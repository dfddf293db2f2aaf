// Philox4x32-10 against the Random123 known-answer vectors, FNV-1a against its published values, the
// normal's moments, and the counter-based property: any slice drawn alone equals the same slice of
// the whole.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"

namespace zerodp {
namespace {

struct PhiloxVector {
  PhiloxCounter ctr;
  PhiloxKey key;
  PhiloxCounter expected;
};

// Random123's kat_vectors, "philox4x32 10" lines: counter, key, result.
TEST(Philox, KnownAnswerVectors) {
  const PhiloxVector vectors[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& v : vectors) EXPECT_EQ(philox4x32(v.ctr, v.key), v.expected);
}

TEST(Philox, RoundCountMatters) {
  const PhiloxCounter zero{0, 0, 0, 0};
  EXPECT_NE(philox4x32(zero, {0, 0}, 7), philox4x32(zero, {0, 0}, 10));
}

TEST(CounterRng, MapsSeedStreamAndIndexOntoKeyAndCounter) {
  // Key = seed (low word first), counter = {index lo, index hi, stream lo, stream hi}.
  const CounterRng rng(0x299f31d0a4093822ull, 0x0370734413198a2eull);
  EXPECT_EQ(rng.bits(0x85a308d3243f6a88ull), (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Fnv1a, PublishedValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(fnv1a64("h.0.attn.c_attn.weight"), fnv1a64("h.1.attn.c_attn.weight"));
  static_assert(fnv1a64("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

TEST(CounterRng, NormalMomentsOnAMillionDraws) {
  const size_t n = 1000000;
  std::vector<float> z(n);
  CounterRng(42, fnv1a64("moments")).fill_normal(0, n, 0.0f, 1.0f, z.data());
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  size_t beyond3 = 0;
  for (float v : z) {
    ASSERT_TRUE(std::isfinite(v));
    const double d = v;
    s1 += d;
    s2 += d * d;
    s3 += d * d * d;
    s4 += d * d * d * d;
    beyond3 += std::fabs(d) > 3.0;
  }
  const double mean = s1 / n, var = s2 / n - mean * mean;
  // Standard errors: mean 0.001, variance 0.0014, skewness 0.0025, kurtosis 0.005; allow about 4-5 of them.
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.007);
  EXPECT_NEAR(s3 / n, 0.0, 0.012);
  EXPECT_NEAR(s4 / n, 3.0, 0.05);
  // P(|z| > 3) = 0.0027.
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.0027, 0.0004);
}

TEST(CounterRng, UniformRangeAndMean) {
  const size_t n = 200000;
  std::vector<float> u(n);
  CounterRng(7, 3).fill_uniform(0, n, u.data());
  double sum = 0;
  size_t below_quarter = 0;
  for (float v : u) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    below_quarter += v < 0.25f;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.003);
  EXPECT_NEAR(static_cast<double>(below_quarter) / n, 0.25, 0.004);
}

TEST(CounterRng, SliceDrawnAloneEqualsTheSameSliceOfTheWhole) {
  const CounterRng rng(1234, fnv1a64("wte.weight"));
  const size_t n = 100000;  // over the OpenMP threshold: the parallel split must not matter
  std::vector<float> whole(n);
  rng.fill_normal(0, n, 0.5f, 0.02f, whole.data());
  for (size_t first : {size_t{0}, size_t{1}, size_t{999}, size_t{31337}, size_t{99990}}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{10}, size_t{40000}}) {
      if (first + count > n) continue;
      std::vector<float> part(count);
      rng.fill_normal(first, count, 0.5f, 0.02f, part.data());
      for (size_t k = 0; k < count; ++k)
        ASSERT_EQ(part[k], whole[first + k]) << "first " << first << " k " << k;
    }
  }
  // One element at a time gives the same too.
  std::vector<float> unit(n);
  rng.fill_normal(0, n, 0.0f, 1.0f, unit.data());
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(rng.normal(i), unit[i]);
}

TEST(CounterRng, SeedsAndStreamsGiveDifferentUncorrelatedValues) {
  const size_t n = 100000;
  std::vector<float> a(n), b(n), c(n), a2(n);
  CounterRng(1, 10).fill_normal(0, n, 0.0f, 1.0f, a.data());
  CounterRng(1, 11).fill_normal(0, n, 0.0f, 1.0f, b.data());
  CounterRng(2, 10).fill_normal(0, n, 0.0f, 1.0f, c.data());
  CounterRng(1, 10).fill_normal(0, n, 0.0f, 1.0f, a2.data());
  EXPECT_EQ(a, a2);  // deterministic
  auto corr = [n](const std::vector<float>& x, const std::vector<float>& y) {
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; ++i) {
      sxy += double(x[i]) * y[i];
      sxx += double(x[i]) * x[i];
      syy += double(y[i]) * y[i];
    }
    return sxy / std::sqrt(sxx * syy);
  };
  // Standard error of a correlation of independent draws: 1/sqrt(n) = 0.003.
  EXPECT_LT(std::fabs(corr(a, b)), 0.015);
  EXPECT_LT(std::fabs(corr(a, c)), 0.015);
  // Neighbouring elements of one stream are independent too.
  std::vector<float> shifted(a.begin() + 1, a.end());
  shifted.push_back(a[0]);
  EXPECT_LT(std::fabs(corr(a, shifted)), 0.015);
}

}  // namespace
}  // namespace zerodp
