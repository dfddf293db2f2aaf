// Elementwise math for the kernels' inner loops, written so that GCC vectorizes the loops that call
// it. glibc's expf and tanhf are scalar calls unless the whole build uses -ffast-math, and they
// would dominate the softmax over a 50257-token vocabulary (N·V exponentials a step) and the GELU.
// The double overloads keep libm: double serves the gradient checks, where accuracy is the point.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/dispatch.h"

namespace zerodp::kernels::detail {

// e^x in float, relative error below 8e-8 (1.3 ulp, measured over the whole range).
// x = n·ln2 + r with n = round(x·log2 e) and |r| ≤ ln2/2; ln2 is split into a part with 9
// significant bits (so n·ln2_hi is exact for |n| ≤ 128) and the remainder, which keeps r accurate.
// e^r is its degree-7 Taylor polynomial (truncation error r⁸/8! < 6e-9 on that interval), and 2^n
// is written straight into the exponent bits. x is clamped to [-87.3, 88.3], where 2^n stays a
// normal float: below the range the result is ~1e-38 instead of a denormal or 0, which no caller can
// tell apart next to the sums ≥ 1 it is added to. A NaN input stays NaN (the comparisons are false).
inline float fast_exp(float x) {
  constexpr float kLo = -87.3f, kHi = 88.3f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding and subtracting it rounds to an integer
  x = x < kLo ? kLo : x;
  x = x > kHi ? kHi : x;
  const float shifted = x * kLog2e + kRound;  // kRound + n: n in the low bits of the mantissa
  const float n = shifted - kRound;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from n's bits, not static_cast<int32_t>(n): that is undefined for a NaN (UBSan says so), and
  // the difference of the two floats' bits is n exactly for every n the clamps allow (−126..128).
  const uint32_t n_int = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound);
  const uint32_t bits = (n_int + 127u) << 23;
  return p * std::bit_cast<float>(bits);
}
inline double fast_exp(double x) { return std::exp(x); }

// tanh(u) = 1 − 2/(e^{2u} + 1), exact at the limits (e^{2u} → ∞ gives 1, → 0 gives −1). Near u = 0
// the error is absolute (~1e-7), not relative, which is what GELU needs: it adds tanh to 1.
inline float fast_tanh(float u) { return 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f); }
inline double fast_tanh(double u) { return std::tanh(u); }

}  // namespace zerodp::kernels::detail

namespace zerodp::kernels::detail {

// The row helpers are inlined into their callers, so that an x86-64-v4 kernel (kernels/dispatch.h)
// sums in its own lanes, as a native build does.

// max_j x[j] over n ≥ 1 values.
template <class T>
ZDP_KERNEL_INLINE T row_max(const T* x, int n) {
  T m = x[0];
#pragma omp simd reduction(max : m)
  for (int j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// y[j] = e^{x[j] − shift} for j < n (y may alias x); returns Σ_j y[j], summed in double so that a
// 50257-wide row loses nothing to the float accumulation.
template <class T>
ZDP_KERNEL_INLINE double exp_shifted(T* y, const T* x, int n, T shift) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    const T e = fast_exp(x[j] - shift);
    y[j] = e;
    sum += e;
  }
  return sum;
}

}  // namespace zerodp::kernels::detail
