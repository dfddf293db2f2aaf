// The runtime query on a machine with a GPU (gpu_main skips without one).
#include <gtest/gtest.h>

#include "cuda/runtime.h"

namespace zerodp::cuda {
namespace {

TEST(CudaRuntime, ReportsTheVisibleGpus) {
  const RuntimeInfo info = query_runtime();
  ASSERT_FALSE(info.gpus.empty());
  EXPECT_TRUE(info.why_none.empty());
  EXPECT_GE(info.runtime_version, 12000);
  EXPECT_GE(info.driver_version, info.runtime_version) << "a driver older than the runtime cannot run its kernels";
  for (const GpuInfo& g : info.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GE(g.cc_major, 8) << g.name << ": zerodp's bf16 kernels need compute capability 8.0 or later";
    EXPECT_GT(g.total_memory, uint64_t{1} << 30);
    EXPECT_GT(g.multiprocessors, 0);
  }
}

}  // namespace
}  // namespace zerodp::cuda
