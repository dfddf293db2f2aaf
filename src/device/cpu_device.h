// The CPU device: memory in RAM (its device and host tiers alike, counted apart), GEMMs through
// OpenBLAS (fp32) and kernels/gemm16.h (16-bit), GPT-2's kernels from kernels/, all run on the
// calling thread and the OpenMP pool before each call returns (so its queue is always empty and its
// events are complete).
#pragma once

#include "device/device.h"

namespace zerodp::device {

class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  Buffer allocate(size_t bytes, MemCategory category) override;
  Buffer allocate_host(size_t bytes, MemCategory category) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void fill_zero(void* dst, size_t bytes) override;
  void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) override;
  void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) override;
  double sum_squares(const void* x, DType type, size_t n) override;
  void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp, int64_t t,
                    bool decay, float grad_scale) override;
  void sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                  bool decay, float grad_scale) override;
  void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
            const void* B, int ldb, float beta, float* C, int ldc) override;
  std::unique_ptr<Event> record() override;
  void synchronize() override {}

 protected:
  const Gpt2Kernels<float>& gpt2_f32() const override;
  const Gpt2Kernels<double>& gpt2_f64() const override;
  const Gpt2Kernels<bf16>& gpt2_bf16() const override;
  const Gpt2Kernels<fp16>& gpt2_fp16() const override;
};

}  // namespace zerodp::device
