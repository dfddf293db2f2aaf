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
  ZDP_DEVICE_OPERATIONS

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
