// The element-wise arithmetic of the reductions (what the MPI operators for bf16 and fp16 run).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "comm/reduce_kernels.h"
#include "core/dtype.h"

namespace zerodp::comm {
namespace {

uint16_t to16(float f, DType t) { return t == DType::kBF16 ? fp32_to_bf16(f) : fp32_to_fp16(f); }
float from16(uint16_t h, DType t) { return t == DType::kBF16 ? bf16_to_fp32(h) : fp16_to_fp32(h); }

class Reduce16 : public ::testing::TestWithParam<DType> {};

// Every result is the fp32 operation on the widened operands, rounded once: compared with the
// conversions of core/dtype.h, element by element, on random operands of mixed magnitudes.
TEST_P(Reduce16, SumAndMaxRoundTheFp32ResultOnce) {
  const DType t = GetParam();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> scale(-12, 12);
  const size_t n = 5000;
  std::vector<uint16_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = to16(std::ldexp(normal(rng), scale(rng)), t);
    b[i] = to16(std::ldexp(normal(rng), scale(rng)), t);
  }
  std::vector<uint16_t> sum = b, max = b;
  sum_into(a.data(), sum.data(), n, t);
  max_into(a.data(), max.data(), n, t);
  size_t inexact_sums = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = from16(a[i], t), y = from16(b[i], t);
    ASSERT_EQ(sum[i], to16(x + y, t)) << i << ": " << x << " + " << y;
    ASSERT_EQ(from16(max[i], t), std::max(x, y)) << i;
    if (from16(sum[i], t) != x + y) ++inexact_sums;
  }
  EXPECT_GT(inexact_sums, n / 4);  // the data did exercise the rounding
}

// Inf, NaN, overflow, signed zeros and subnormals, every pair (121 of them, so the vector path of
// 8 elements sees them as well as the scalar tail): the same bits as the scalar fp32 computation.
TEST_P(Reduce16, SpecialValuesMatchTheScalarComputation) {
  const DType t = GetParam();
  const float big = t == DType::kF16 ? 65504.f : 3.0e38f;
  const float tiny = t == DType::kF16 ? std::ldexp(1.f, -24) : std::ldexp(1.f, -133);
  const std::vector<float> specials = {0.f, -0.f, 1.f, -1.f, big, -big, INFINITY, -INFINITY, NAN, tiny, -3 * tiny};
  std::vector<uint16_t> a, b;
  for (float x : specials)
    for (float y : specials) {
      a.push_back(to16(x, t));
      b.push_back(to16(y, t));
    }
  std::vector<uint16_t> sum = b, max = b;
  sum_into(a.data(), sum.data(), a.size(), t);
  max_into(a.data(), max.data(), a.size(), t);
  auto same = [t](uint16_t got, float want) {
    return std::isnan(want) ? std::isnan(from16(got, t)) : got == to16(want, t);
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = from16(a[i], t), y = from16(b[i], t);
    EXPECT_TRUE(same(sum[i], y + x)) << y << " + " << x << " gave " << from16(sum[i], t);
    EXPECT_TRUE(same(max[i], x > y ? x : y)) << "max(" << y << ", " << x << ") gave " << from16(max[i], t);
  }
}

// A sum whose 16-bit rounding is a tie: 1 + 2^-8 in bf16 (8 significant bits) lies halfway
// between 1 and 1 + 2^-7 and must round to the even one, 1. In fp16 the same holds at 1 + 2^-11.
TEST_P(Reduce16, TiesRoundToEven) {
  const DType t = GetParam();
  const float half_ulp = t == DType::kBF16 ? std::ldexp(1.f, -8) : std::ldexp(1.f, -11);
  uint16_t one = to16(1.f, t), tiny = to16(half_ulp, t);
  sum_into(&tiny, &one, 1, t);
  EXPECT_EQ(from16(one, t), 1.f);
  uint16_t odd = to16(1.f + 2 * half_ulp, t);  // 1 + ulp: odd last bit
  tiny = to16(half_ulp, t);
  sum_into(&tiny, &odd, 1, t);
  EXPECT_EQ(from16(odd, t), 1.f + 4 * half_ulp);  // rounds up to the even neighbour
}

TEST_P(Reduce16, DivisionIsDoneInFp32AndRoundedOnce) {
  const DType t = GetParam();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  for (int w : {1, 2, 3, 4, 7}) {
    std::vector<uint16_t> v(1000);
    for (auto& x : v) x = to16(u(rng), t);
    std::vector<uint16_t> d = v;
    divide_in_place(d.data(), d.size(), t, w);
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(d[i], to16(from16(v[i], t) / static_cast<float>(w), t)) << "w=" << w << " i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Reduce16, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The communication thread's own conversions give exactly core's bits: every 16-bit pattern widens
// as bf16_to_fp32 / fp16_to_fp32 does, and random floats of every magnitude, the values halfway
// between two 16-bit numbers, infinities and NaNs narrow as fp32_to_bf16 / fp32_to_fp16 do.
TEST_P(Reduce16, WidenAndNarrowAreCoresConversions) {
  const DType t = GetParam();
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  widen_to_f32(all.data(), t, wide.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = from16(all[i], t);
    ASSERT_TRUE(std::memcmp(&want, &wide[i], 4) == 0 || (std::isnan(want) && std::isnan(wide[i]))) << i;
  }
  std::vector<float> f;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.f, 2.f);
  std::uniform_int_distribution<int> ex(-30, 30);
  for (int i = 0; i < 100000; ++i) f.push_back(std::ldexp(mant(rng), ex(rng)) * (i % 2 ? 1.f : -1.f));
  for (size_t i = 0; i + 1 < all.size(); i += 7) f.push_back(0.5f * (wide[i] + wide[i + 1]));  // midpoints
  for (float x : {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f, 65504.f, 65520.f, 3.4e38f}) f.push_back(x);
  std::vector<uint16_t> narrow(f.size());
  narrow_from_f32(f.data(), narrow.data(), t, f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const uint16_t want = to16(f[i], t);
    if (std::isnan(f[i]))
      ASSERT_TRUE(std::isnan(from16(narrow[i], t))) << "NaN stays NaN";
    else
      ASSERT_EQ(narrow[i], want) << f[i];
  }
}

TEST(ReduceF32, SumMaxAndDivide) {
  std::vector<float> a = {1.f, -2.f, 3.5f, 0.f}, b = {0.5f, -4.f, 1.f, -0.f};
  std::vector<float> s = b, m = b;
  sum_into(a.data(), s.data(), 4, DType::kF32);
  max_into(a.data(), m.data(), 4, DType::kF32);
  EXPECT_EQ(s, (std::vector<float>{1.5f, -6.f, 4.5f, 0.f}));
  EXPECT_EQ(m, (std::vector<float>{1.f, -2.f, 3.5f, 0.f}));
  divide_in_place(s.data(), 4, DType::kF32, 3);
  EXPECT_EQ(s[0], 1.5f / 3.f);
  EXPECT_EQ(s[1], -2.f);
}


// The fp32 ordered reduction's one-pass sum has the bits of the widen / accumulate / divide / narrow
// sequence it replaced, for any number of rows (2: its own loop; more: through its L1 block), with
// the output over one of the rows (an in-place all-reduce) or apart.
TEST(ReduceF32, SumInOrderIsTheAccumulationSequenceBitwise) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1e3f);
  const size_t n = 2500;  // more than one block, and a partial one
  for (int count : {2, 3, 5}) {
    for (int divisor : {1, count}) {
      for (int out_row : {-1, 0, count - 1}) {
        std::vector<std::vector<float>> rows(static_cast<size_t>(count), std::vector<float>(n));
        for (auto& r : rows)
          for (float& x : r) x = dist(rng);
        std::vector<float> want(n);
        widen_to_f32(rows[0].data(), DType::kF32, want.data(), n);
        for (int j = 1; j < count; ++j) accumulate_f32(rows[j].data(), DType::kF32, want.data(), n);
        if (divisor != 1) divide_in_place(want.data(), n, DType::kF32, divisor);
        std::vector<const float*> ptrs;
        for (auto& r : rows) ptrs.push_back(r.data());
        std::vector<float> apart(n, -1.f);
        float* out = out_row < 0 ? apart.data() : rows[static_cast<size_t>(out_row)].data();
        sum_f32_in_order(ptrs.data(), count, out, n, divisor);
        ASSERT_EQ(0, std::memcmp(out, want.data(), n * sizeof(float)))
            << count << " rows, divisor " << divisor << ", output over row " << out_row;
      }
    }
  }
}

}  // namespace
}  // namespace zerodp::comm
