// main() of every GPU test binary (tests/cuda_gpu/test_*.cu): without a visible GPU it prints why
// and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <cstdio>

#include <gtest/gtest.h>

#include "cuda/runtime.h"

int main(int argc, char** argv) {
  const zerodp::cuda::RuntimeInfo info = zerodp::cuda::query_runtime();
  if (info.gpus.empty()) {
    std::printf("SKIPPED: no GPU visible (%s); CUDA runtime %s, driver %s\n", info.why_none.c_str(),
                zerodp::cuda::version_string(info.runtime_version).c_str(),
                info.driver_version ? zerodp::cuda::version_string(info.driver_version).c_str() : "none");
    return 77;
  }
  std::printf("GPU %d: %s (compute capability %d.%d, %d SMs, %.1f GiB)\n", info.gpus[0].index,
              info.gpus[0].name.c_str(), info.gpus[0].cc_major, info.gpus[0].cc_minor,
              info.gpus[0].multiprocessors, info.gpus[0].total_memory / 1073741824.0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
