#include "cuda/device_memory.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"

namespace zerodp::cuda {

// Out of memory is an answer (the allocator empties its cache and tries again); any other error is
// a failure. The runtime's error is sticky until read, so it is cleared here. Callers call the
// allocation first and pass its pointer after, in two statements: as arguments of one call,
// `f(cudaMalloc(&p, n), p)`, the copy of p may be taken before cudaMalloc writes it (C++ leaves the
// order open, and GCC took it first: every allocation read as out of memory on the first GPU run).
static void* null_if_out_of_memory(cudaError_t e, void* p, const char* what) {
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  check(e, what, __FILE__, __LINE__);
  return p;
}

void* CudaDeviceMemory::allocate(size_t bytes) {
  const DeviceGuard on(ordinal_);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  return null_if_out_of_memory(e, p, "cudaMalloc");
}

// At process exit the runtime may be torn down before the last allocator: nothing is left to free.
static void check_free(cudaError_t e, const char* what) {
  if (e == cudaErrorCudartUnloading) {
    cudaGetLastError();
    return;
  }
  check(e, what, __FILE__, __LINE__);
}

void CudaDeviceMemory::free(void* p) {
  const DeviceGuard on(ordinal_);
  check_free(cudaFree(p), "cudaFree");
}

void* PinnedHostMemory::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, bytes);
  p = null_if_out_of_memory(e, p, "cudaMallocHost");
  if (p == nullptr || reinterpret_cast<uintptr_t>(p) % kAlignment == 0) return p;
  check_free(cudaFreeHost(p), "cudaFreeHost");
  void* raw = nullptr;
  const cudaError_t e_raw = cudaMallocHost(&raw, bytes + kAlignment - 1);
  raw = null_if_out_of_memory(e_raw, raw, "cudaMallocHost");
  if (raw == nullptr) return nullptr;
  const uintptr_t at = (reinterpret_cast<uintptr_t>(raw) + kAlignment - 1) / kAlignment * kAlignment;
  void* aligned = reinterpret_cast<void*>(at);
  std::lock_guard<std::mutex> lock(mu_);
  shifted_[aligned] = raw;
  return aligned;
}

void PinnedHostMemory::free(void* p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = shifted_.find(p); it != shifted_.end()) {
      p = it->second;
      shifted_.erase(it);
    }
  }
  check_free(cudaFreeHost(p), "cudaFreeHost");
}

}  // namespace zerodp::cuda
