// kernels/precision.h: the squared norm the clipping coefficient comes from. Its fp32 path sums fixed
// blocks of 4096 values, each in order, then the blocks in order; it must give exactly those bits
// however it overlaps the blocks' chains and whatever the thread count.
#include "kernels/precision.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

namespace zerodp::kernels {
namespace {

double blocks_in_order(const std::vector<float>& x) {
  constexpr size_t kBlock = 4096;
  double total = 0;
  for (size_t b = 0; b < x.size(); b += kBlock) {
    double s = 0;
    for (size_t i = b; i < std::min(x.size(), b + kBlock); ++i) s += static_cast<double>(x[i]) * x[i];
    total += s;
  }
  return total;
}

TEST(Precision, SumOfSquaresIsTheBlockwiseSumBitForBit) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  const int saved = omp_get_max_threads();
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4096 * 8}, size_t{4096 * 8 + 1}, size_t{4096 * 37 + 100},
                   size_t{1} << 20}) {
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng) * std::exp(dist(rng));  // a wide range of magnitudes
    const double expect = blocks_in_order(x);
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const double got = sum_squares(x.data(), DType::kF32, n);
      EXPECT_EQ(0, std::memcmp(&got, &expect, sizeof got)) << "n " << n << " threads " << threads << ": " << got
                                                            << " against " << expect;
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace zerodp::kernels
