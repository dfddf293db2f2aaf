// The kernels' run-time choice between their baseline and AVX-512 copies (kernels/dispatch.h).
#include <gtest/gtest.h>

#include <cstring>

#include "core/cpu.h"
#include "kernels/dispatch.h"

namespace zerodp::kernels {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// core/cpu.h's reading of CPUID says what GCC's ifunc resolvers decide, so that kernels_isa() reports
// the copy that actually runs.
TEST(KernelDispatch, CpuFeaturesAgreeWithGccsResolver) {
  __builtin_cpu_init();
  EXPECT_EQ(cpu_features().x86_64_v4, __builtin_cpu_supports("x86-64-v4") != 0);
  if (cpu_features().x86_64_v4) EXPECT_TRUE(cpu_features().avx512f);
}
#endif

TEST(KernelDispatch, ReportsTheCopyThatRuns) {
  const char* isa = kernels_isa();
#if ZDP_KERNELS_DISPATCHED
  EXPECT_STREQ(isa, cpu_features().x86_64_v4 ? "x86-64-v4" : "x86-64-v3");
#else
  EXPECT_STREQ(isa, "build target");
#endif
}

}  // namespace
}  // namespace zerodp::kernels
