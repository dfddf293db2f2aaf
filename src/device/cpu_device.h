// The CPU device: memory in RAM (its device and host tiers alike, counted apart), GEMMs through
// OpenBLAS (fp32) and kernels/gemm16.h (16-bit), the models' kernels from kernels/, all run on the
// calling thread and the OpenMP pool before each call returns (so its compute queue is always empty
// and record()'s events are complete). Transfers run on a worker thread of their own
// (device/transfer_queue.h), or inline with ZERODP_TRANSFER_THREAD=0.
#pragma once

#include <memory>
#include <mutex>

#include "device/device.h"
#include "device/transfer_queue.h"

namespace zerodp::device {

class CpuDevice : public Device {
 public:
  std::string name() const override { return "cpu"; }
  bool host_addressable() const override { return true; }
  Buffer allocate(size_t bytes, MemCategory category) override;
  Buffer allocate_host(size_t bytes, MemCategory category) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) override;
  void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) override;
  double sum_squares(const void* x, DType type, size_t n) override;
  void quantize_int8(const void* x, DType type, size_t n, void* out) override;
  void dequantize_int8(const void* q, size_t n, void* x, DType type) override;
  void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp, int64_t t,
                    bool decay, float grad_scale) override;
  void sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                  bool decay, float grad_scale) override;
  void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
            const void* B, int ldb, float beta, float* C, int ldc) override;
  void transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) override;
  std::unique_ptr<Event> record_transfer() override;
  std::unique_ptr<Event> record() override;
  void synchronize() override;

  // The transfer queue, created at first use (inline per ZERODP_TRANSFER_THREAD).
  TransferQueue& transfers();

 protected:
  const ModelKernels<float>* kernels_f32() const override;
  const ModelKernels<double>* kernels_f64() const override;
  const ModelKernels<bf16>* kernels_bf16() const override;
  const ModelKernels<fp16>* kernels_fp16() const override;

 private:
  std::once_flag transfers_once_;
  std::unique_ptr<TransferQueue> transfers_;
};

// Why this CPU's fp32 GEMMs may run below its speed (OpenBLAS held to kernels without the CPU's AVX-512,
// kernels/blas_info.h), as a sentence for a warning; empty when nothing is in the way.
std::string cpu_gemm_warning();

}  // namespace zerodp::device
