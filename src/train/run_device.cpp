#include "train/run_device.h"

#include <fmt/format.h>

#include "core/error.h"
#include "device/cpu_device.h"
#include "plan/estimator.h"
#if ZERODP_WITH_CUDA
#include "comm/nccl_communicator.h"
#include "device/cuda_device.h"
#endif

namespace zerodp::train {

void check_device_support(const TrainConfig& cfg, const device::DeviceSpec& spec) {
  // The GPU's GPT-2 kernels are 16-bit with fp32 accumulation; fp32 compute is the CPU's reference path.
  ZDP_REQUIRE(device::supports(spec, cfg.precision.dtype),
              "--device {}: {} compute runs on the CPU only; train on the GPU with --dtype bf16 (or fp16)",
              device::device_spec_name(spec), dtype_name(cfg.precision.dtype));
}

RunDevice open_run_device(const device::DeviceSpec& spec, std::shared_ptr<comm::Communicator> world) {
  RunDevice run;
  if (spec.kind == device::DeviceSpec::Kind::kCpu) {
    run.comm = std::move(world);
    run.description = "cpu";
    run.warning = device::cpu_gemm_warning();
    return run;
  }
#if ZERODP_WITH_CUDA
  int local_rank = 0;
  if (spec.ordinal < 0) {
    comm::UntrackedTraffic untracked(*world);  // not training traffic
    local_rank = world->split_by_host()->rank();
  }
  const device::GpuChoice gpu_choice = device::choose_gpu(spec, local_rank);
  const int ordinal = gpu_choice.ordinal;
  auto gpu = std::make_unique<device::CudaDevice>(ordinal);
  std::unique_ptr<comm::Communicator> gpu_comm =
      comm::make_gpu_communicator(*world, ordinal, static_cast<cudaStream_t>(gpu->compute_stream()));
  const bool staged = gpu_comm->backend() == "staged";
  run.description = fmt::format("{} ({}), {}", gpu->name(), gpu_choice.name,
                                staged ? "host-staged collectives through MPI" : "NCCL");
  // The world stays alive under the GPU communicator: its traffic ledger is the world's.
  run.comm = std::shared_ptr<comm::Communicator>(gpu_comm.release(),
                                                 [world](comm::Communicator* c) { delete c; });
  run.memory_bytes = gpu_choice.memory_bytes;
  run.owned = std::move(gpu);
  return run;
#else
  throw UsageError(fmt::format("--device {}: this zerodp was built without CUDA", device::device_spec_name(spec)));
#endif
}

}  // namespace zerodp::train
