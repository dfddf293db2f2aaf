// The CUDA backends of the caching allocator (cuda/caching_allocator.h): device memory from
// cudaMalloc on one GPU, and page-locked host memory from cudaMallocHost (what copies
// to and from the GPU need to run asynchronously, and what offloading keeps its tensors in).
#pragma once

#include <mutex>
#include <unordered_map>

#include "cuda/caching_allocator.h"

namespace zerodp::cuda {

// Blocks of GPU `ordinal`, whichever device is current on the calling thread.
class CudaDeviceMemory final : public RawMemory {
 public:
  explicit CudaDeviceMemory(int ordinal) : ordinal_(ordinal) {}
  void* allocate(size_t bytes) override;  // nullptr when the device is out of memory
  void free(void* p) override;

 private:
  int ordinal_;
};

// Blocks start on a 4096-byte boundary, as the CPU's host tier does (Buffer::kHostAlignment): NVMe
// offload reads and writes them with O_DIRECT. cudaMallocHost gives whole pages in practice; a block
// that does not start on one is allocated again 4095 bytes longer and handed out from its first
// boundary.
class PinnedHostMemory final : public RawMemory {
 public:
  static constexpr size_t kAlignment = 4096;
  void* allocate(size_t bytes) override;  // nullptr when no page-locked memory is left
  void free(void* p) override;

 private:
  std::mutex mu_;
  std::unordered_map<void*, void*> shifted_;  // aligned block -> what cudaMallocHost returned
};

}  // namespace zerodp::cuda
