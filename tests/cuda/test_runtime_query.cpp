// The runtime query where no GPU is visible (every development machine): an answer, not an error.
#include <gtest/gtest.h>

#if ZERODP_WITH_CUDA
#include "cuda/runtime.h"

namespace zerodp::cuda {
namespace {

TEST(CudaRuntimeQuery, AnswersWithOrWithoutAGpu) {
  const RuntimeInfo info = query_runtime();
  EXPECT_GE(info.runtime_version, 12000);
  // Either GPUs are listed, or the runtime's reason for none is.
  EXPECT_NE(info.gpus.empty(), info.why_none.empty()) << info.why_none;
  // Asking twice gives the same answer: the failed first query left no sticky error behind.
  const RuntimeInfo again = query_runtime();
  EXPECT_EQ(again.gpus.size(), info.gpus.size());
  EXPECT_EQ(again.why_none, info.why_none);
}

TEST(CudaRuntimeQuery, VersionString) {
  EXPECT_EQ(version_string(13000), "13.0");
  EXPECT_EQ(version_string(12080), "12.8");
}

}  // namespace
}  // namespace zerodp::cuda
#endif
