#include "cuda/runtime.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/error.h"
#include "cuda/check.h"

namespace zerodp::cuda {

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw RuntimeFailure(fmt::format("{}:{}: {} failed: {}: {}", file, line, what, cudaGetErrorName(e),
                                   cudaGetErrorString(e)));
}

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

RuntimeInfo query_runtime() {
  RuntimeInfo info;
  cudaRuntimeGetVersion(&info.runtime_version);
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess) info.driver_version = 0;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // No driver, or a driver and no device: the runtime says which. Clear the sticky error so that
    // later calls do not report it again.
    info.why_none = fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
    return info;
  }
  if (count == 0) info.why_none = "the CUDA runtime reports 0 devices";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.total_memory = p.totalGlobalMem;
    g.cc_major = p.major;
    g.cc_minor = p.minor;
    g.multiprocessors = p.multiProcessorCount;
    int clock = 0;
    if (cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, i) == cudaSuccess) g.clock_khz = clock;
    info.gpus.push_back(std::move(g));
  }
  return info;
}

}  // namespace zerodp::cuda
