// The CUDA backends of the caching allocator (cuda/caching_allocator.h): device memory from
// cudaMalloc on the current device, and page-locked host memory from cudaMallocHost (what copies
// to and from the GPU need to run asynchronously, and what offloading keeps its tensors in).
#pragma once

#include "cuda/caching_allocator.h"

namespace zerodp::cuda {

class CudaDeviceMemory final : public RawMemory {
 public:
  void* allocate(size_t bytes) override;  // nullptr when the device is out of memory
  void free(void* p) override;
};

class PinnedHostMemory final : public RawMemory {
 public:
  void* allocate(size_t bytes) override;  // nullptr when no page-locked memory is left
  void free(void* p) override;
};

}  // namespace zerodp::cuda
