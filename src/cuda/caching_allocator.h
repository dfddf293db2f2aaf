// A caching allocator for one GPU's memory (and, with another backend, for page-locked host memory).
//
// cudaMalloc and cudaFree synchronize the whole device and take tens of microseconds; a training step
// frees and allocates the same transient buffers (activations, unit gradients, gathered parameters,
// communication buckets) every step. So freed blocks are kept, by size class, and handed out again:
// after the first step no allocation reaches the driver.
//
// The accounting stays exact: the memory ledger (core/memory.h) counts the bytes asked for, as on the
// CPU, by whoever calls allocate (the CUDA device); this allocator reports on the side what it has
// reserved from the driver (reserved() = in use, rounded up to size classes, + cached), which is what
// nvidia-smi sees. The gap between the two is the cost of caching, and is shown, never folded into
// the ledger's categories.
//
// Size classes: requests round up to 512 bytes below 1 MiB and to 2 MiB above, and a cached block is
// reused only for a request of its exact class, so that a block is never split and memory cannot
// fragment into pieces no request fits. Ordering: the device computes on one stream, so a block freed
// after its last use was issued on that stream may be handed out at once (the next use is ordered after
// the last); a block another stream still reads (a collective on the communication stream) must be
// freed only once that stream's event has completed — the caller's duty, as the engine already waits
// for its collectives before it frees their buffers.
//
// When the backend is out of memory, every cached block is returned to it and the request is tried
// once more; then the failure is the caller's (OutOfMemory).
//
// Host logic only, over a backend, so that the CPU test suite covers it (tests/cuda/); the CUDA
// backends (cudaMalloc, cudaMallocHost) are in cuda/device_memory.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace zerodp::cuda {

// Where the blocks come from: allocate returns nullptr when out of memory (anything else is an error
// the backend throws itself).
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* p) = 0;
};

class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CachingAllocator {
 public:
  static constexpr size_t kSmallRound = 512;
  static constexpr size_t kLargeThreshold = size_t{1} << 20;
  static constexpr size_t kLargeRound = size_t{2} << 20;

  explicit CachingAllocator(RawMemory& raw) : raw_(raw) {}
  ~CachingAllocator() {
    try {
      release_cached();
      for (auto& [p, size] : in_use_) raw_.free(p);  // leaked by the caller: give it back all the same
    } catch (...) {
      // A destructor cannot report; the process is ending or the device is already lost.
    }
  }
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class of a request: what a block for it reserves.
  static size_t size_class(size_t bytes) {
    if (bytes == 0) bytes = 1;
    const size_t round = bytes < kLargeThreshold ? kSmallRound : kLargeRound;
    if (bytes > SIZE_MAX - round) throw OutOfMemory("allocation size overflows its size class");
    return (bytes + round - 1) / round * round;
  }

  // A block of at least `bytes` (never null). Throws OutOfMemory when the backend has none even after
  // the cache was emptied.
  void* allocate(size_t bytes) {
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    if (auto it = cached_.find(cls); it != cached_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= cls;
      ++hits_;
    } else {
      p = raw_.allocate(cls);
      if (p == nullptr) {
        release_cached_locked();
        p = raw_.allocate(cls);
      }
      if (p == nullptr)
        throw OutOfMemory("out of memory allocating a block of " + std::to_string(cls) + " bytes (" +
                          std::to_string(in_use_bytes_) + " bytes in use)");
      reserved_bytes_ += cls;
      ++misses_;
    }
    in_use_.emplace(p, cls);
    in_use_bytes_ += cls;
    return p;
  }

  // Keeps the block for reuse. Freeing a pointer this allocator did not hand out is a bug (logic_error).
  void free(void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    if (it == in_use_.end()) throw std::logic_error("CachingAllocator::free: not a block of this allocator");
    const size_t cls = it->second;
    in_use_.erase(it);
    in_use_bytes_ -= cls;
    cached_[cls].push_back(p);
    cached_bytes_ += cls;
  }

  // Returns every cached block to the backend (e.g. before handing the GPU to another library).
  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

  size_t reserved() const { std::lock_guard<std::mutex> l(mu_); return reserved_bytes_; }  // from the backend
  size_t in_use() const { std::lock_guard<std::mutex> l(mu_); return in_use_bytes_; }      // handed out (classes)
  size_t cached() const { std::lock_guard<std::mutex> l(mu_); return cached_bytes_; }      // kept for reuse
  uint64_t hits() const { std::lock_guard<std::mutex> l(mu_); return hits_; }    // requests served from the cache
  uint64_t misses() const { std::lock_guard<std::mutex> l(mu_); return misses_; }  // requests that reached the backend

 private:
  void release_cached_locked() {
    for (auto& [cls, blocks] : cached_) {
      for (void* p : blocks) raw_.free(p);
      reserved_bytes_ -= cls * blocks.size();
      cached_bytes_ -= cls * blocks.size();
      blocks.clear();
    }
  }

  RawMemory& raw_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> cached_;  // size class -> free blocks of that class
  std::unordered_map<void*, size_t> in_use_;      // block -> its size class
  size_t reserved_bytes_ = 0, in_use_bytes_ = 0, cached_bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace zerodp::cuda
