// What CUDA sees on this machine: the runtime and driver versions and each visible GPU, asked
// without allocating on any of them. Never throws: a machine with no driver or no GPU (every
// development machine of this project) is an answer, with the runtime's reason, not an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerodp::cuda {

struct GpuInfo {
  int index = 0;                // CUDA's device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;             // "NVIDIA H200"
  uint64_t total_memory = 0;    // bytes
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
  int clock_khz = 0;            // the SM clock's peak, for an MFU estimate (0: not reported)
};

struct RuntimeInfo {
  int runtime_version = 0;      // cudaRuntimeGetVersion: 13000 for 13.0
  int driver_version = 0;       // cudaDriverGetVersion: 0 without a driver
  std::vector<GpuInfo> gpus;
  std::string why_none;         // when gpus is empty: the runtime's reason ("no CUDA-capable device ...")
};

RuntimeInfo query_runtime();

// "13.0" from 13000.
std::string version_string(int cuda_version);

}  // namespace zerodp::cuda
