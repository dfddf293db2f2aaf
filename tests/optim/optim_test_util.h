// Shared by the optim tests: deterministic random data and the per-step loop that drives an update.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace zerodp::optim::testing {

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

// max over i of |a - b| / (atol + rtol·|b|): <= 1 means every element is within tolerance.
inline double worst_ratio(const std::vector<float>& a, const std::vector<double>& b, double atol,
                          double rtol) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(d <= worst)) worst = d;  // also catches NaN
  }
  return worst;
}

}  // namespace zerodp::optim::testing
