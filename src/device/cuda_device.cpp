#include "device/cuda_device.h"

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/quantize.h"
#include "core/log.h"
#include "cuda/attention.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/kernel_times.h"
#include "cuda/kernels.h"
#include "cuda/llama_kernels.h"
#include "device/cpu_device.h"
#include "device/cuda_kernel_context.h"
#include "device/cuda_model_kernels.h"
#include "kernels/matmul.h"

namespace zerodp::device {

using namespace detail;

namespace {

// The allocator's blocks as a Buffer's source. Out of GPU memory is the memory-limit error (exit 3),
// as an allocation over --memory-budget is.
class AllocatorSource final : public BufferSource {
 public:
  AllocatorSource(cuda::RawMemory& raw, const char* what) : allocator_(raw), what_(what) {}
  void* allocate(size_t bytes) override {
    try {
      return allocator_.allocate(bytes);
    } catch (const cuda::OutOfMemory& e) {
      throw BudgetError(fmt::format("{}: {}", what_, e.what()));
    }
  }
  void deallocate(void* p, size_t) noexcept override {
    try {
      allocator_.free(p);
    } catch (...) {
      // Only a pointer the allocator never gave can fail here: a bug that must not end in terminate().
    }
  }
  cuda::CachingAllocator& allocator() { return allocator_; }

 private:
  cuda::CachingAllocator allocator_;
  const char* what_;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(cudaStream_t stream) {
    ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    ZDP_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool done() const override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    ZDP_CUDA_CHECK(e);
    return true;
  }
  void wait() override { ZDP_CUDA_CHECK(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_ = nullptr;
};

bool is_host_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;  // memory CUDA does not know: the C library's
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

}  // namespace

struct CudaDevice::Impl {
  int ordinal;
  cudaStream_t compute = nullptr;
  cudaStream_t copies = nullptr;
  cuda::CudaDeviceMemory device_raw;
  cuda::PinnedHostMemory host_raw;
  AllocatorSource device_memory{device_raw, "out of GPU memory"};
  AllocatorSource host_memory{host_raw, "out of page-locked host memory"};
  Buffer gemm_workspace;  // cuBLASLt's, counted in the ledger (act: the GEMMs' working memory)
  std::unique_ptr<cuda::GemmContext> gemm;
  // Page-locked: where sum_squares' answers land, one slot a span; grown between calls, when no
  // kernel writes the old slots any more (each call waits for its sums before it returns).
  double* sum_results = nullptr;
  size_t sum_slots = 0;
  double* sum_slots_for(size_t count) {
    if (count > sum_slots) {
      if (sum_results != nullptr) ZDP_CUDA_CHECK(cudaFreeHost(sum_results));
      sum_results = nullptr;
      sum_slots = 0;
      ZDP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&sum_results), count * sizeof(double)));
      sum_slots = count;
    }
    return sum_results;
  }
  CpuDevice host;  // computes on the page-locked host buffers (offload)
  KernelProfiler profiler;  // before the context that points at it
  KernelContext kernel_context;
  CudaKernels<bf16> kernels_bf16{&kernel_context};
  CudaKernels<fp16> kernels_fp16{&kernel_context};

  explicit Impl(int n) : ordinal(n), device_raw(n) {
    const bool fused_classifier = fused_classifier_from_env();  // a bad value refused before anything is made
    ZDP_CUDA_CHECK(cudaSetDevice(n));
    try {  // a constructor that throws runs no destructor: what is made so far is released here
      ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
      ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
      sum_slots_for(1);
      gemm_workspace = Buffer(cuda::GemmContext::kWorkspaceBytes, MemCategory::kAct, MemTier::kDevice, device_memory);
      gemm = std::make_unique<cuda::GemmContext>(compute, gemm_workspace.data());
    } catch (...) {
      release();
      throw;
    }
    kernel_context = {ordinal, compute, gemm.get(), &device_memory, &profiler, fused_classifier};
  }
  ~Impl() { release(); }
  // Whatever exists of the streams, the GEMM context and its workspace, and the sum's landing place.
  void release() noexcept {
    // The streams are this GPU's: it is current while they go, and the caller's device after.
    int previous = -1;
    const bool switched =
        cudaGetDevice(&previous) == cudaSuccess && previous != ordinal && cudaSetDevice(ordinal) == cudaSuccess;
    if (profiler.enabled()) {
      try {
        const std::string table = profiler.report();
        if (!table.empty()) log::info("cuda:{} {}", ordinal, table);
      } catch (...) {
        // Nothing to report from a device going away with an error.
      }
    }
    profiler.release();
    gemm.reset();
    gemm_workspace.release();
    if (compute != nullptr) cudaStreamSynchronize(compute);
    if (copies != nullptr) cudaStreamSynchronize(copies);
    if (sum_results != nullptr) cudaFreeHost(sum_results);
    if (copies != nullptr) cudaStreamDestroy(copies);
    if (compute != nullptr) cudaStreamDestroy(compute);
    sum_results = nullptr;
    sum_slots = 0;
    copies = compute = nullptr;
    if (switched) cudaSetDevice(previous);
    cudaGetLastError();  // nothing here can be reported: clear what failed for the next caller
  }
};

CudaDevice::CudaDevice(int ordinal) : impl_(std::make_unique<Impl>(ordinal)) {}
CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const { return fmt::format("cuda:{}", impl_->ordinal); }
int CudaDevice::ordinal() const { return impl_->ordinal; }
void* CudaDevice::compute_stream() const { return impl_->compute; }
size_t CudaDevice::reserved_bytes() const { return impl_->device_memory.allocator().reserved(); }
size_t CudaDevice::reserved_host_bytes() const { return impl_->host_memory.allocator().reserved(); }

std::string CudaDevice::kernel_time_report() {
  if (!impl_->profiler.enabled()) return {};
  const cuda::DeviceGuard on(impl_->ordinal);
  return impl_->profiler.report();
}

Device& CudaDevice::host() { return impl_->host; }

Buffer CudaDevice::allocate(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kDevice, impl_->device_memory);
}

Buffer CudaDevice::allocate_host(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kHost, impl_->host_memory);
}

void CudaDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Entry on(impl_->kernel_context, "copy");
  ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, impl_->compute));
  // The CPU device's callers read a host destination as soon as copy returns.
  if (is_host_pointer(dst)) ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
}

void CudaDevice::fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  const Entry on(impl_->kernel_context, "fill_zero");
  ZDP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, impl_->compute));
}

void CudaDevice::convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  const Entry on(impl_->kernel_context, "convert");
  cuda::convert(src, src_type, dst, dst_type, n, impl_->compute);
}

void CudaDevice::add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  const Entry on(impl_->kernel_context, "add_into");
  cuda::add_into(dst, dst_type, src, src_type, n, impl_->compute);
}

double CudaDevice::sum_squares(const void* x, DType type, size_t n) {
  double sum = 0.0;
  const SquaresSpan span{x, type, n};
  sum_squares_each({&span, 1}, &sum);
  return sum;
}

void CudaDevice::sum_squares_each(std::span<const SquaresSpan> spans, double* out) {
  size_t most = 0;
  for (const SquaresSpan& s : spans) most = std::max(most, s.n);
  if (most == 0) {
    std::fill(out, out + spans.size(), 0.0);
    return;
  }
  const Entry on(impl_->kernel_context, "sum_squares");
  double* slots = impl_->sum_slots_for(spans.size());
  // One scratch for them all, the largest span's (as many bytes as that span alone would take): the
  // sums run one after another on the compute stream.
  Buffer scratch = allocate(cuda::sum_squares_scratch_doubles(most) * sizeof(double), MemCategory::kComm);
  for (size_t i = 0; i < spans.size(); ++i)
    if (spans[i].n > 0)
      cuda::sum_squares(slots + i, spans[i].x, spans[i].type, spans[i].n, scratch.as<double>(), impl_->compute);
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));  // the answers are the host's now
  for (size_t i = 0; i < spans.size(); ++i) out[i] = spans[i].n > 0 ? slots[i] : 0.0;
}

void CudaDevice::quantize_int8(const void* x, DType type, size_t n, void* out) {
  const Entry on(impl_->kernel_context, "quantize_int8");
  cuda::quantize_int8(x, type, n, out, impl_->compute);
}

void CudaDevice::dequantize_int8(const void* qbytes, size_t n, void* x, DType type) {
  const Entry on(impl_->kernel_context, "dequantize_int8");
  cuda::dequantize_int8(qbytes, n, x, type, impl_->compute);
}

void CudaDevice::round_bf16_stochastic(const float* x, void* out, size_t n, uint64_t stream, uint64_t first) {
  const Entry on(impl_->kernel_context, "round_bf16_stochastic");
  cuda::round_bf16_stochastic(x, static_cast<uint16_t*>(out), n, stream, first, impl_->compute);
}

void CudaDevice::adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                              int64_t t, bool decay, float grad_scale) {
  const Entry on(impl_->kernel_context, "adamw_update");
  cuda::adamw_update(p, g, m, v, n, hp, t, decay, grad_scale, impl_->compute);
}

void CudaDevice::sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp,
                            int64_t t, bool decay, float grad_scale) {
  ZDP_CHECK(momentum != nullptr || hp.momentum == 0.0 || n == 0, "SGD with momentum needs a buffer");
  const Entry on(impl_->kernel_context, "sgd_update");
  cuda::sgd_update(p, g, momentum, n, hp, t, decay, grad_scale, impl_->compute);
}

void CudaDevice::muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s) {
  const Entry on(impl_->kernel_context, "muon_momentum");
  cuda::muon_momentum(g, m, u, n, s, impl_->compute);
}

void CudaDevice::muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s) {
  const Entry on(impl_->kernel_context, "muon_apply");
  cuda::muon_apply(w, o, n, s, impl_->compute);
}

void CudaDevice::gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                      int lda, const void* B, int ldb, float beta, float* C, int ldc) {
  const Entry on(impl_->kernel_context, "gemm");
  impl_->gemm->gemm(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CudaDevice::transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  if (n == 0) return;
  const cuda::DeviceGuard on(impl_->ordinal);
  // After the compute issued so far (which may still be writing src), on the copy stream.
  cudaEvent_t ready = nullptr;
  ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ZDP_CUDA_CHECK(cudaEventRecord(ready, impl_->compute));
  ZDP_CUDA_CHECK(cudaStreamWaitEvent(impl_->copies, ready, 0));
  ZDP_CUDA_CHECK(cudaEventDestroy(ready));  // destroyed once the wait it was recorded for has run
  if (src_type == dst_type)
    ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * dtype_size(src_type), cudaMemcpyDefault, impl_->copies));
  else
    // Page-locked host memory is addressable from the GPU: the conversion reads or writes it directly.
    cuda::convert(src, src_type, dst, dst_type, n, impl_->copies);
}

std::unique_ptr<Event> CudaDevice::record_transfer() {
  const cuda::DeviceGuard on(impl_->ordinal);
  return std::make_unique<CudaEvent>(impl_->copies);
}

std::unique_ptr<Event> CudaDevice::record() {
  const cuda::DeviceGuard on(impl_->ordinal);
  return std::make_unique<CudaEvent>(impl_->compute);
}

void CudaDevice::synchronize() {
  const cuda::DeviceGuard on(impl_->ordinal);
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->copies));
}

// No fp32 or fp64 tables: the attention kernels are 16-bit only (cuda_device_supports).
const ModelKernels<bf16>* CudaDevice::kernels_bf16() const { return &impl_->kernels_bf16; }
const ModelKernels<fp16>* CudaDevice::kernels_fp16() const { return &impl_->kernels_fp16; }

template <class P>
const ModelKernels<P>& cuda_model_kernels() {
  static const CudaKernels<P> sizing(nullptr);
  return sizing;
}
template const ModelKernels<bf16>& cuda_model_kernels<bf16>();
template const ModelKernels<fp16>& cuda_model_kernels<fp16>();

}  // namespace zerodp::device

#endif  // ZERODP_WITH_CUDA
