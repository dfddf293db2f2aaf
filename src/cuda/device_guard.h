// Makes a GPU the calling thread's current device for a scope, and restores the one that was current
// before (CUDA's current device is per thread: a communicator's or device's calls may come from any).
#pragma once

#include <cuda_runtime.h>

#include "cuda/check.h"

namespace zerodp::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) ZDP_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace zerodp::cuda
