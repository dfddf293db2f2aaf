// Helpers shared by the kernel tests: random tensors, closeness checks that report the worst element,
// and a central-difference gradient check.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

namespace zerodp::kernels::testing {

inline std::vector<double> random_normal(size_t n, uint64_t seed, double stddev = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

inline std::vector<int32_t> random_tokens(size_t n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, V - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// Converts to T (the same values as float when T is float, so float and double runs see identical
// inputs).
template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Every element within rtol of the tensor's own scale: |a_i − e_i| ≤ rtol·max_j |e_j|. A relative
// error in the infinity norm: elements near zero are judged against the tensor's magnitude, not
// against themselves.
template <class A>
void expect_close_scaled(const std::vector<A>& actual, const std::vector<double>& expected, double rtol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double scale = std::max(max_abs(expected), 1e-300);
  size_t worst = 0;
  double worst_err = -1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (!(err <= worst_err)) {  // also catches NaN
      worst_err = err;
      worst = i;
    }
  }
  EXPECT_LE(worst_err / scale, rtol) << what << ": worst element " << worst << " is " << actual[worst]
                                     << ", expected " << expected[worst] << " (tensor scale " << scale
                                     << ")";
}

// Every element within rtol of itself, with the tensor's scale times floor_rel as a floor:
// |a_i − e_i| ≤ rtol·max(|e_i|, floor_rel·max_j |e_j|).
template <class A>
void expect_close_elementwise(const std::vector<A>& actual, const std::vector<double>& expected,
                              double rtol, const std::string& what, double floor_rel = 1e-3) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double floor = std::max(max_abs(expected) * floor_rel, 1e-300);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double err = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double bound = rtol * std::max(std::abs(expected[i]), floor);
    if (!(err <= bound)) {
      ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected " << expected[i]
                    << " (relative error " << err / std::max(std::abs(expected[i]), floor) << " > "
                    << rtol << ")";
      return;
    }
  }
}

// Sets the OpenMP thread count for a scope and restores it after.
class ScopedThreadCount {
 public:
  explicit ScopedThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreadCount() { omp_set_num_threads(saved_); }
  ScopedThreadCount(const ScopedThreadCount&) = delete;
  ScopedThreadCount& operator=(const ScopedThreadCount&) = delete;

 private:
  int saved_;
};

// One input of a gradient check: its values (perturbed in place, then restored exactly) and the
// gradient the backward kernel computed for it.
struct GradInput {
  std::string name;
  std::vector<double>* value;
  const std::vector<double>* analytic;
};

// Compares each analytic gradient with the central difference (L(x+h) − L(x−h))/2h of the scalar
// loss L, element by element (all of them, or `max_checks` of them drawn at random).
// Tolerance: in double, with h = 1e-5 and inputs and gradients of order 1, the truncation error
// h²·L‴/6 is ~1e-11 and the rounding error ~ε·|L|/h ~ 1e-10 for |L| ~ 10; rtol = 1e-6 of
// max(|g|, 1e-3·max|g|) leaves a margin of about 1e3 over both, while any mistake in a formula
// shows up as an O(1) relative error.
inline void expect_gradients_match(const std::function<double()>& loss,
                                   std::initializer_list<GradInput> inputs, double rtol = 1e-6,
                                   size_t max_checks = 0, double h = 1e-5) {
  // Thousands of tiny forward calls: on one thread they do not pay an OpenMP barrier each, which is
  // slow on a loaded machine. (The analytic gradients were computed by the caller on the usual pool.)
  const ScopedThreadCount one_thread(1);
  std::mt19937_64 rng(12345);
  for (const GradInput& in : inputs) {
    std::vector<double>& x = *in.value;
    ASSERT_EQ(x.size(), in.analytic->size()) << in.name;
    std::vector<size_t> indices(x.size());
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
    if (max_checks != 0 && indices.size() > max_checks) {
      std::shuffle(indices.begin(), indices.end(), rng);
      indices.resize(max_checks);
    }
    std::vector<double> numeric, analytic;
    for (size_t i : indices) {
      const double saved = x[i];
      x[i] = saved + h;
      const double lp = loss();
      x[i] = saved - h;
      const double lm = loss();
      x[i] = saved;
      numeric.push_back((lp - lm) / (2 * h));
      analytic.push_back((*in.analytic)[i]);
    }
    expect_close_elementwise(analytic, numeric, rtol, "gradient of " + in.name);
  }
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace zerodp::kernels::testing
