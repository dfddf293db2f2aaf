// The CUDA device's kernel context (cuda_device.cpp): the profiler of $ZERODP_GPU_PROFILE, what the
// kernel tables issue their work with, and the entry guard every table entry and device operation
// opens. Internal to device/ (included by cuda_device.cpp and device/cuda_model_kernels.h only).
#pragma once

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/gemm.h"
#include "cuda/kernel_times.h"

namespace zerodp::device::detail {

// $ZERODP_GPU_PROFILE=1: every kernel-table entry and device operation is timed on the GPU with a pair
// of events on the compute stream, and the times by entry (cuda/kernel_times.h says why zerodp times
// itself) are logged when the device goes. Off, an entry costs one branch. Only the outermost entry
// of a thread is timed (an entry calling another would count twice). The events come from a pool;
// finished ones are read every kDrainEvery entries, so that a long run holds a bounded number.
class KernelProfiler {
 public:
  struct Span {
    cudaEvent_t start = nullptr, stop = nullptr;
    const char* name = nullptr;
  };

  KernelProfiler() {
    const char* v = std::getenv("ZERODP_GPU_PROFILE");
    enabled_ = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }
  KernelProfiler(const KernelProfiler&) = delete;
  KernelProfiler& operator=(const KernelProfiler&) = delete;
  ~KernelProfiler() { release(); }

  bool enabled() const { return enabled_; }

  // Records the span's start on `stream`; false when this thread is already inside a timed entry.
  bool begin(cudaStream_t stream, Span& span) {
    if (depth()++ > 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    span.start = take_event();
    span.stop = take_event();
    ZDP_CUDA_CHECK(cudaEventRecord(span.start, stream));
    if (first_ == nullptr) {
      first_ = take_event();
      last_ = take_event();
      ZDP_CUDA_CHECK(cudaEventRecord(first_, stream));
    }
    return true;
  }
  // Ends a span begin() started (noexcept: it runs in a destructor, also while an error unwinds).
  void end(cudaStream_t stream, Span& span, const char* name) noexcept {
    --depth();
    std::lock_guard<std::mutex> lock(mu_);
    if (cudaEventRecord(span.stop, stream) != cudaSuccess || cudaEventRecord(last_, stream) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    span.name = name;
    pending_.push_back(span);
    if (pending_.size() >= kDrainEvery) drain_locked();
  }
  void leave() noexcept { --depth(); }

  // The table (empty when nothing was timed); reads every pending span first.
  std::string report() {
    std::lock_guard<std::mutex> lock(mu_);
    drain_locked();
    if (times_.empty()) return {};
    float span_ms = 0;
    if (first_ != nullptr && cudaEventElapsedTime(&span_ms, first_, last_) != cudaSuccess) {
      cudaGetLastError();
      span_ms = 0;
    }
    return times_.report(span_ms);
  }

  // Destroys every event (the device's GPU current).
  void release() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Span& s : pending_) {
      cudaEventDestroy(s.start);
      cudaEventDestroy(s.stop);
    }
    pending_.clear();
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
    pool_.clear();
    if (first_ != nullptr) cudaEventDestroy(first_);
    if (last_ != nullptr) cudaEventDestroy(last_);
    first_ = last_ = nullptr;
    cudaGetLastError();
  }

 private:
  static constexpr size_t kDrainEvery = 4096;

  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  cudaEvent_t take_event() {
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    ZDP_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  // Waits for the pending spans' last stop, adds each one's time and returns its events to the pool.
  void drain_locked() noexcept {
    if (pending_.empty()) return;
    if (cudaEventSynchronize(pending_.back().stop) != cudaSuccess) cudaGetLastError();
    for (const Span& s : pending_) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, s.start, s.stop) == cudaSuccess)
        times_.add(s.name, ms);
      else
        cudaGetLastError();
      pool_.push_back(s.start);
      pool_.push_back(s.stop);
    }
    pending_.clear();
  }

  bool enabled_ = false;
  std::mutex mu_;
  std::vector<cudaEvent_t> pool_;
  std::vector<Span> pending_;
  cudaEvent_t first_ = nullptr, last_ = nullptr;  // the first entry's start, the latest one's end
  cuda::KernelTimes times_;
};

// What a CUDA device's kernels issue their work with: the GPU, its compute stream, its GEMM
// handle, the allocator their working memory comes from, and the profiler. The device's own
// (CudaDevice::Impl).
struct KernelContext {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  cuda::GemmContext* gemm = nullptr;
  BufferSource* memory = nullptr;
  KernelProfiler* profiler = nullptr;
  bool fused_classifier = true;  // classifier_loss_*: fused_classifier_from_env()
};

// $ZERODP_GPU_CLASSIFIER: "fused" (unset or empty too) keeps no probabilities and rounds dlogits once
// into the GEMM operand (cuda::crossentropy_backward_rounded); "unfused" runs the softmax's forward and
// backward over fp32 probabilities and rounds them after, as before 2026-12-01. The same bits either
// way: the switch is there so that one GPU run can time the two.
inline bool fused_classifier_from_env() {
  const char* v = std::getenv("ZERODP_GPU_CLASSIFIER");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "fused") == 0) return true;
  ZDP_REQUIRE(std::strcmp(v, "unfused") == 0, "ZERODP_GPU_CLASSIFIER is '{}': say fused or unfused",
              std::string(v).substr(0, 32));
  return false;
}

// An entry of the device (a kernel-table entry, a device operation): its GPU current for the call,
// and the call timed when profiling. Made as `const auto on = enter(__func__)`: the name is the entry's.
class Entry {
 public:
  Entry(const KernelContext& c, const char* name)
      : guard_(c.ordinal),
        profiler_(c.profiler != nullptr && c.profiler->enabled() ? c.profiler : nullptr),
        stream_(c.stream),
        name_(name) {
    if (profiler_ != nullptr) timed_ = profiler_->begin(stream_, span_);
  }
  ~Entry() {
    if (profiler_ == nullptr) return;
    if (timed_)
      profiler_->end(stream_, span_, name_);
    else
      profiler_->leave();
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

 private:
  cuda::DeviceGuard guard_;
  KernelProfiler* profiler_;
  cudaStream_t stream_;
  const char* name_;
  KernelProfiler::Span span_;
  bool timed_ = false;
};

}  // namespace zerodp::device::detail

#endif  // ZERODP_WITH_CUDA
