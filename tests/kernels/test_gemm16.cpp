// 16-bit GEMMs with fp32 accumulation (kernels/gemm16.h), both implementations, against a double
// reference computed here on the same 16-bit inputs: only the fp32 accumulation differs, so the
// error bound is fp32's, K·2⁻²⁴ relative to Σ|a||b| (we allow a margin of 4).
#include "kernels/gemm16.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"

namespace zerodp::kernels {
namespace {

std::vector<uint16_t> random16(DType t, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) {
    const float f = dist(rng);
    x = t == DType::kBF16 ? fp32_to_bf16(f) : fp32_to_fp16(f);
  }
  return v;
}
double widen(DType t, uint16_t x) { return t == DType::kBF16 ? bf16_to_fp32(x) : fp16_to_fp32(x); }

struct Case {
  bool ta, tb;
  int M, N, K;
  float alpha, beta;
};

using Impl = void (*)(DType, bool, bool, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float,
                      float*, int);

void check(Impl impl, DType t, const Case& c, const std::string& what) {
  // Leading dimensions wider than the rows, so that strided views are exercised.
  const int a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int lda = a_cols + 3, ldb = b_cols + 5, ldc = c.N + 2;
  auto A = random16(t, static_cast<size_t>(a_rows) * lda, 1);
  auto B = random16(t, static_cast<size_t>(b_rows) * ldb, 2);
  std::vector<float> C(static_cast<size_t>(c.M) * ldc);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : C) x = dist(rng);
  const std::vector<float> C0 = C;
  impl(t, c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
  double worst = 0;
  for (int m = 0; m < c.M; ++m) {
    for (int n = 0; n < c.N; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < c.K; ++k) {
        const double a = widen(t, c.ta ? A[static_cast<size_t>(k) * lda + m] : A[static_cast<size_t>(m) * lda + k]);
        const double b = widen(t, c.tb ? B[static_cast<size_t>(n) * ldb + k] : B[static_cast<size_t>(k) * ldb + n]);
        ref += a * b;
        mag += std::abs(a * b);
      }
      const double c0 = C0[static_cast<size_t>(m) * ldc + n];
      const double expect = c.alpha * ref + c.beta * c0;
      const double bound = 4.0 * (c.K + 2) * std::ldexp(1.0, -24) * (std::abs(c.alpha) * mag + std::abs(c.beta * c0)) + 1e-30;
      const double err = std::abs(C[static_cast<size_t>(m) * ldc + n] - expect);
      worst = std::max(worst, err / bound);
      ASSERT_LE(err, bound) << what << " at (" << m << ", " << n << ")";
    }
    // Padding columns of C are untouched.
    for (int n = c.N; n < ldc; ++n)
      ASSERT_EQ(C[static_cast<size_t>(m) * ldc + n], C0[static_cast<size_t>(m) * ldc + n]) << what;
  }
}

const Case kCases[] = {
    {false, false, 37, 29, 53, 1.0f, 0.0f},  {false, true, 64, 48, 40, 1.0f, 1.0f},
    {true, false, 33, 70, 19, 0.5f, 1.0f},   {true, true, 17, 23, 77, 1.0f, 0.0f},
    {false, false, 600, 40, 530, 1.0f, 1.0f}, {true, false, 40, 520, 600, 1.0f, 0.0f},
    {false, true, 1, 1, 1, 1.0f, 0.0f},      {false, false, 5, 3, 0, 1.0f, 0.5f},
    // The fallback's blocking: depth in chunks of 1024 (K = 2100: three, beta applied once), and rows
    // (M = 2100) or columns (N = 2100) split until both widened blocks fit its scratch.
    {false, true, 40, 30, 2100, 1.0f, 1.0f}, {true, false, 2100, 24, 1030, 1.0f, 0.5f},
    {false, true, 24, 2100, 1030, 2.0f, 0.0f},
};

std::string name(DType t, const Case& c) {
  return fmt::format("{} {}{} {}x{}x{} alpha {} beta {}", dtype_name(t), c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', c.M,
                     c.N, c.K, c.alpha, c.beta);
}

TEST(Gemm16, BlasFallbackAccumulatesInFp32) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (const Case& c : kCases) check(&gemm16_blas, t, c, "blas " + name(t, c));
}

TEST(Gemm16, MklAccumulatesInFp32) {
  if (!gemm16_mkl_loaded(DType::kBF16))
    GTEST_SKIP() << "oneMKL not loaded: " << gemm16_info(DType::kBF16).reason;
  for (DType t : {DType::kBF16, DType::kF16}) {
    if (!gemm16_mkl_loaded(t)) continue;
    for (const Case& c : kCases) check(&gemm16_mkl, t, c, "mkl " + name(t, c));
  }
}

TEST(Gemm16, OneDnnAccumulatesInFp32) {
  if (!gemm16_onednn_built()) GTEST_SKIP() << "this build has no oneDNN";
  for (DType t : {DType::kBF16, DType::kF16}) {
    if (gemm16_onednn_probe(t).empty()) continue;  // no 16-bit matmul for t on this CPU
    for (const Case& c : kCases) check(&gemm16_onednn, t, c, "onednn " + name(t, c));
  }
}

TEST(Gemm16, ChosenImplementationAccumulatesInFp32) {
  for (DType t : {DType::kBF16, DType::kF16})
    for (const Case& c : kCases) check(&gemm16, t, c, "chosen " + name(t, c));
}

// The same call on the same values gives the same bits, wherever the operands lie in memory (the
// model's parameters are gathered into different buffers at different stages).
void expect_independent_of_alignment(Impl impl, DType t, const std::string& label) {
  const int M = 96, N = 80, K = 200;
  auto A = random16(t, static_cast<size_t>(M) * K, 7), B = random16(t, static_cast<size_t>(K) * N, 8);
  std::vector<float> ref(static_cast<size_t>(M) * N);
  impl(t, false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, ref.data(), N);
  for (size_t shift : {1, 3, 8, 31}) {
    std::vector<uint16_t> A2(A.size() + shift), B2(B.size() + shift + 5);
    std::memcpy(A2.data() + shift, A.data(), A.size() * 2);
    std::memcpy(B2.data() + shift + 5, B.data(), B.size() * 2);
    std::vector<float> C2(ref.size() + shift);
    impl(t, false, true, M, N, K, 1.0f, A2.data() + shift, K, B2.data() + shift + 5, K, 0.0f, C2.data() + shift, N);
    ASSERT_EQ(0, std::memcmp(C2.data() + shift, ref.data(), ref.size() * 4)) << label << " " << dtype_name(t)
                                                                           << " shift " << shift;
  }
}

TEST(Gemm16, ResultDoesNotDependOnAlignment) {
  for (DType t : {DType::kBF16, DType::kF16}) expect_independent_of_alignment(&gemm16, t, "chosen");
}

// Each implementation that can run here, not only the chosen one.
TEST(Gemm16, EveryImplementationIsIndependentOfAlignment) {
  const DType t = DType::kBF16;
  expect_independent_of_alignment(&gemm16_blas, t, "blas");
  if (gemm16_mkl_loaded(t)) expect_independent_of_alignment(&gemm16_mkl, t, "mkl");
  if (gemm16_onednn_built() && !gemm16_onednn_probe(t).empty())
    expect_independent_of_alignment(&gemm16_onednn, t, "onednn");
}

// MKL threads with zerodp's OpenMP pool (the GNU threading layer), not sequentially.
TEST(Gemm16, MklUsesTheOpenMpPool) {
  if (!gemm16_mkl_loaded(DType::kBF16))
    GTEST_SKIP() << "oneMKL not loaded: " << gemm16_info(DType::kBF16).reason;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  EXPECT_EQ(gemm16_mkl_max_threads(), 2);
  omp_set_num_threads(1);
  EXPECT_EQ(gemm16_mkl_max_threads(), 1);
  omp_set_num_threads(saved);
}

TEST(Gemm16, InfoSaysWhatWasChosenAndWhy) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    const Gemm16Info& info = gemm16_info(t);
    EXPECT_FALSE(info.library.empty());
    EXPECT_FALSE(info.isa.empty());
    EXPECT_FALSE(info.reason.empty());
    if (info.impl == Gemm16Impl::kMkl) {
      EXPECT_TRUE(gemm16_mkl_loaded(t));
    }
    if (info.impl == Gemm16Impl::kOneDnn) {
      EXPECT_TRUE(gemm16_onednn_built());
      EXPECT_FALSE(gemm16_onednn_probe(t).empty());
    }
  }
}

}  // namespace
}  // namespace zerodp::kernels
