#include "device/cuda_device.h"

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/error.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"

namespace zerodp::device {

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
  std::unique_ptr<cuda::GemmContext> gemm;
  double* sum_result = nullptr;  // page-locked: sum_squares' answer lands here

  explicit Impl(int n) : ordinal(n) {
    ZDP_CUDA_CHECK(cudaSetDevice(n));
    ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
    ZDP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&sum_result), sizeof(double)));
    gemm = std::make_unique<cuda::GemmContext>(compute);
  }
  ~Impl() {
    gemm.reset();
    cudaStreamSynchronize(compute);
    cudaStreamSynchronize(copies);
    cudaFreeHost(sum_result);
    cudaStreamDestroy(copies);
    cudaStreamDestroy(compute);
  }
  void launched() { ZDP_CUDA_CHECK(cudaGetLastError()); }
};

CudaDevice::CudaDevice(int ordinal) : impl_(std::make_unique<Impl>(ordinal)) {}
CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const { return fmt::format("cuda:{}", impl_->ordinal); }
int CudaDevice::ordinal() const { return impl_->ordinal; }
void* CudaDevice::compute_stream() const { return impl_->compute; }
size_t CudaDevice::reserved_bytes() const { return impl_->device_memory.allocator().reserved(); }
size_t CudaDevice::reserved_host_bytes() const { return impl_->host_memory.allocator().reserved(); }

Buffer CudaDevice::allocate(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kDevice, impl_->device_memory);
}

Buffer CudaDevice::allocate_host(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kHost, impl_->host_memory);
}

void CudaDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, impl_->compute));
  // The CPU device's callers read a host destination as soon as copy returns.
  if (is_host_pointer(dst)) ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
}

void CudaDevice::fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  ZDP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, impl_->compute));
}

void CudaDevice::convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  cuda::convert(src, src_type, dst, dst_type, n, impl_->compute);
}

void CudaDevice::add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  cuda::add_into(dst, dst_type, src, src_type, n, impl_->compute);
}

double CudaDevice::sum_squares(const void* x, DType type, size_t n) {
  if (n == 0) return 0.0;
  Buffer scratch = allocate(cuda::sum_squares_scratch_doubles(n) * sizeof(double), MemCategory::kComm);
  cuda::sum_squares(impl_->sum_result, x, type, n, scratch.as<double>(), impl_->compute);
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));  // the answer is the host's now
  return *impl_->sum_result;
}

void CudaDevice::adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                              int64_t t, bool decay, float grad_scale) {
  cuda::adamw_update(p, g, m, v, n, hp, t, decay, grad_scale, impl_->compute);
}

void CudaDevice::sgd_update(float*, const float*, float*, size_t, const optim::SGDParams&, int64_t, bool, float) {
  throw RuntimeFailure("SGD on the CUDA device is not implemented in this version: use AdamW (--optimizer adamw)");
}

void CudaDevice::gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                      int lda, const void* B, int ldb, float beta, float* C, int ldc) {
  impl_->gemm->gemm(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CudaDevice::transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  if (n == 0) return;
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

std::unique_ptr<Event> CudaDevice::record_transfer() { return std::make_unique<CudaEvent>(impl_->copies); }
std::unique_ptr<Event> CudaDevice::record() { return std::make_unique<CudaEvent>(impl_->compute); }

void CudaDevice::synchronize() {
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->copies));
}

namespace {
[[noreturn]] void no_gpt2_table(const char* type) {
  throw RuntimeFailure(fmt::format(
      "GPT-2's {} kernels are not wired into the CUDA device in this version (they are in src/cuda and tested "
      "with ctest -L gpu); train with --device cpu",
      type));
}
}  // namespace

const Gpt2Kernels<float>& CudaDevice::gpt2_f32() const { no_gpt2_table("fp32"); }
const Gpt2Kernels<double>& CudaDevice::gpt2_f64() const { no_gpt2_table("fp64"); }
const Gpt2Kernels<bf16>& CudaDevice::gpt2_bf16() const { no_gpt2_table("bf16"); }
const Gpt2Kernels<fp16>& CudaDevice::gpt2_fp16() const { no_gpt2_table("fp16"); }

}  // namespace zerodp::device

#endif  // ZERODP_WITH_CUDA
