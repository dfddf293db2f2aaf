// ZeRO++'s int8 block quantization (core/quantize.h): the layout, the error bound, zeros, non-finite
// blocks, 16-bit inputs and outputs, and that the bytes depend on the values alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/quantize.h"

namespace zerodp {
namespace {

std::vector<float> values(size_t n, uint64_t seed, float spread) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Quantize, BytesAreAScaleABlockAndAByteAValue) {
  EXPECT_EQ(quantized_int8_bytes(0), 0u);
  EXPECT_EQ(quantized_int8_bytes(1), 5u);
  EXPECT_EQ(quantized_int8_bytes(kQuantBlock), 4 + kQuantBlock);
  EXPECT_EQ(quantized_int8_bytes(kQuantBlock + 1), 8 + kQuantBlock + 1);
}

TEST(Quantize, EachValueComesBackWithinHalfItsBlocksStep) {
  // Blocks of very different magnitudes, and a short last block.
  const size_t n = 5 * kQuantBlock + 17;
  std::vector<float> x = values(n, 7, 1.0f);
  for (size_t i = kQuantBlock; i < 2 * kQuantBlock; ++i) x[i] *= 1e-6f;
  for (size_t i = 3 * kQuantBlock; i < 4 * kQuantBlock; ++i) x[i] *= 1e4f;
  std::vector<uint8_t> q(quantized_int8_bytes(n));
  quantize_int8(x.data(), DType::kF32, n, q.data());
  std::vector<float> back(n);
  dequantize_int8(q.data(), n, back.data(), DType::kF32);
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    float largest = 0;
    const size_t end = std::min(n, (b + 1) * kQuantBlock);
    for (size_t i = b * kQuantBlock; i < end; ++i) largest = std::max(largest, std::fabs(x[i]));
    const float step = largest / 127.0f;
    for (size_t i = b * kQuantBlock; i < end; ++i)
      ASSERT_LE(std::fabs(back[i] - x[i]), 0.5f * step * (1 + 1e-5f) + 1e-30f) << "block " << b << " element " << i;
  }
  // The largest magnitude of a block is exact up to the scale's rounding.
  const size_t at = static_cast<size_t>(std::max_element(x.begin(), x.begin() + kQuantBlock,
                                                         [](float a, float c) { return std::fabs(a) < std::fabs(c); }) -
                                        x.begin());
  EXPECT_NEAR(back[at], x[at], std::fabs(x[at]) * 1e-6f);
}

TEST(Quantize, ZerosStayZerosAndNonFiniteBlocksComeBackNaN) {
  const size_t n = 3 * kQuantBlock;
  std::vector<float> x = values(n, 3, 1.0f);
  std::fill(x.begin(), x.begin() + kQuantBlock, 0.0f);
  x[kQuantBlock + 5] = std::numeric_limits<float>::infinity();
  x[2 * kQuantBlock + 9] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> q(quantized_int8_bytes(n));
  quantize_int8(x.data(), DType::kF32, n, q.data());
  std::vector<float> back(n);
  dequantize_int8(q.data(), n, back.data(), DType::kF32);
  for (size_t i = 0; i < kQuantBlock; ++i) EXPECT_EQ(back[i], 0.0f);
  for (size_t i = kQuantBlock; i < n; ++i) ASSERT_TRUE(std::isnan(back[i])) << i;
}

TEST(Quantize, SixteenBitValuesInAndOut) {
  const size_t n = 2 * kQuantBlock + 3;
  const std::vector<float> x = values(n, 11, 0.05f);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> h(n), back16(n);
    convert(x.data(), DType::kF32, h.data(), t, n);
    std::vector<float> widened(n), back(n), direct(n);
    convert(h.data(), t, widened.data(), DType::kF32, n);
    std::vector<uint8_t> q16(quantized_int8_bytes(n)), q32(quantized_int8_bytes(n));
    quantize_int8(h.data(), t, n, q16.data());
    quantize_int8(widened.data(), DType::kF32, n, q32.data());
    EXPECT_EQ(q16, q32) << dtype_name(t) << ": a 16-bit input quantizes as its fp32 value";
    dequantize_int8(q16.data(), n, back16.data(), t);
    dequantize_int8(q16.data(), n, direct.data(), DType::kF32);
    convert(back16.data(), t, back.data(), DType::kF32, n);
    std::vector<float> rounded(n);
    std::vector<uint16_t> tmp(n);
    convert(direct.data(), DType::kF32, tmp.data(), t, n);
    convert(tmp.data(), t, rounded.data(), DType::kF32, n);
    EXPECT_EQ(std::memcmp(back.data(), rounded.data(), n * sizeof(float)), 0)
        << dtype_name(t) << ": dequantized values are rounded once to the dtype";
  }
}

TEST(Quantize, TheBytesDependOnTheValuesAlone) {
  const size_t n = 1000;
  const std::vector<float> x = values(n, 5, 2.0f);
  std::vector<uint8_t> a(quantized_int8_bytes(n)), b(quantized_int8_bytes(n), 0xAB);
  quantize_int8(x.data(), DType::kF32, n, a.data());
  quantize_int8(x.data(), DType::kF32, n, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace zerodp
