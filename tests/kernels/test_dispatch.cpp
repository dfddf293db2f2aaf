// The kernels' run-time choice between their baseline and x86-64-v4 copies (kernels/dispatch.h).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "kernels/dispatch.h"
#include "kernels/precision.h"
#include "kernels/residual.h"

namespace zerodp::kernels {
#if ZDP_KERNELS_DISPATCHED
namespace v4 {  // the x86-64-v4 copies of two kernels, called here directly (they are the library's)
template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n);
double sum_squares(const void* x, DType t, size_t n);
}  // namespace v4
#endif

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// core/cpu.h's reading of CPUID says what GCC's own test of the CPU says (unless ZERODP_MAX_CPU_ISA,
// which ctest does not set, holds it lower).
TEST(KernelDispatch, CpuFeaturesAgreeWithGccsCpuTest) {
  ASSERT_TRUE(cpu_isa_limit().empty()) << "run without ZERODP_MAX_CPU_ISA";
  __builtin_cpu_init();
  EXPECT_EQ(cpu_features().x86_64_v4, __builtin_cpu_supports("x86-64-v4") != 0);
  if (cpu_features().x86_64_v4) {
    EXPECT_TRUE(cpu_features().avx512f);
  }
}
#endif

TEST(KernelDispatch, ReportsTheCopyThatRuns) {
  const char* isa = kernels_isa();
#if ZDP_KERNELS_DISPATCHED
  EXPECT_EQ(runs_x86_64_v4(), cpu_features().x86_64_v4);
  EXPECT_STREQ(isa, cpu_features().x86_64_v4 ? "x86-64-v4" : "x86-64-v3");
#else
  EXPECT_FALSE(runs_x86_64_v4());
  EXPECT_STREQ(isa, "build target");
#endif
}

#if ZDP_KERNELS_DISPATCHED
// Where the CPU has x86-64-v4, its copies compute what the public kernels compute: the same bits for an
// elementwise kernel, and a sum of squares within rounding of the baseline's (its lanes sum in
// another order) and equal to the public kernel's, which hands the call to it.
TEST(KernelDispatch, TheX8664V4CopiesComputeThePublicKernels) {
  if (!cpu_features().x86_64_v4) GTEST_SKIP() << "this CPU has no x86-64-v4";
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> a(1037), b(a.size()), pub(a.size()), copy(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = nd(rng), b[i] = nd(rng);
  residual_forward(pub.data(), a.data(), b.data(), a.size());
  v4::residual_forward(copy.data(), a.data(), b.data(), a.size());
  EXPECT_EQ(pub, copy);
  const double public_sum = sum_squares(a.data(), DType::kF32, a.size());
  EXPECT_EQ(v4::sum_squares(a.data(), DType::kF32, a.size()), public_sum);
  double exact = 0;
  for (float x : a) exact += static_cast<double>(x) * x;
  EXPECT_NEAR(public_sum, exact, 1e-9 * exact);
}
#endif

}  // namespace
}  // namespace zerodp::kernels
