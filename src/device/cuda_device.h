// The CUDA device: the compute seam (device/device.h) on one GPU.
//   - memory: device buffers from a caching allocator over cudaMalloc, host buffers page-locked
//     (cudaMallocHost, through a caching allocator too), both counted in the ledger exactly as on
//     the CPU (the bytes asked for); what the allocators hold beyond that is reserved_bytes();
//   - ordering: everything is issued on one compute stream and returns at once; record() is a CUDA
//     event on it, synchronize() waits for it. Transfers run on a copy stream of their own, ordered
//     after the compute issued before them;
//   - GEMMs through cuBLASLt (cuda/gemm.h), conversions, sums of squares, AdamW and SGD through
//     cuda/kernels.h.
//   - the models' kernels in bf16 and fp16 (cuda/kernels.h, cuda/llama_kernels.h,
//     cuda/attention.h with grouped-query heads, GEMMs through cuBLASLt), with the CPU's semantics, issued
//     with the device's own stream, GEMM handle and allocator; fp32 and fp64 compute are the CPU's only
//     (the attention is 16-bit).
// A call that hands a result to the host (sum_squares, sum_squares_each) or copies into host memory
// (copy with a host destination) waits for the compute stream first, as the CPU device's callers
// expect of them.
// Devices share no state: each call (its kernels' too) makes the device's GPU the calling
// thread's current device for its duration, so cuda:0 and cuda:1 can be driven from one thread.
#pragma once

#include "core/dtype.h"

namespace zerodp::device {

// The compute types the CUDA device's kernels have (the tables it returns: Device::supports), answerable in a
// build without CUDA: bf16 and fp16.
constexpr bool cuda_device_supports(DType compute) { return compute == DType::kBF16 || compute == DType::kF16; }

}  // namespace zerodp::device

#if ZERODP_WITH_CUDA

#include <memory>
#include <string>

#include "device/device.h"

namespace zerodp::device {

class CudaDevice final : public Device {
 public:
  // On GPU `ordinal` (made the calling thread's current device).
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override;
  bool host_addressable() const override { return false; }
  // The CPU device: ZeRO-Offload's update runs on the host's cores, on the page-locked buffers.
  Device& host() override;
  ZDP_DEVICE_OPERATIONS
  // Every span's sum issued on the compute stream, each into its own page-locked slot, then one wait.
  void sum_squares_each(std::span<const SquaresSpan> spans, double* out) override;

  int ordinal() const;
  // The compute stream (a cudaStream_t), for the communicator to order its collectives after.
  void* compute_stream() const;
  // What the caching allocators hold from the driver (device, page-locked host): at least the
  // ledger's live bytes of that tier, plus rounding and cached blocks.
  size_t reserved_bytes() const;
  size_t reserved_host_bytes() const;
  // With $ZERODP_GPU_PROFILE set when the device was made: the GPU time of each entry so far, as the
  // table logged when the device goes (cuda/kernel_times.h); empty otherwise.
  std::string kernel_time_report();

 protected:
  const ModelKernels<bf16>* kernels_bf16() const override;
  const ModelKernels<fp16>* kernels_fp16() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The CUDA device's kernels (bf16, fp16) with no device behind them, readable without a GPU: only
// their sizing entries (attention_scratch_bytes, attention_saved_bytes, host arithmetic) may be
// called, for the planner's tests; the others throw.
template <class P>
const ModelKernels<P>& cuda_model_kernels();

}  // namespace zerodp::device

#endif  // ZERODP_WITH_CUDA
