// The device a training run computes on (--device) and the communicator its engine talks over:
// on the CPU, the MPI world itself; on a GPU, a CUDA device for the rank (--device cuda: the local
// rank's GPU, local rank modulo the GPUs visible; cuda:N: GPU N) and a GPU communicator over the
// world (NCCL when every rank has a GPU of its own, host staging through MPI when ranks share one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "device/device.h"
#include "device/select.h"
#include "train/train_config.h"

namespace zerodp::train {

struct RunDevice {
  std::unique_ptr<device::Device> owned;  // the GPU's device; null on the CPU (the default device)
  std::shared_ptr<comm::Communicator> comm;  // the engine's communicator
  std::string description;  // "cpu", or "cuda:0 (NVIDIA H200), NCCL"
  uint64_t memory_bytes = 0;  // the GPU's memory (0 on the CPU: the machine's RAM is what bounds it)
  std::string warning;  // what slows this device down that the user can change (rank 0 logs it), or empty
  device::Device* device() const { return owned.get(); }  // for EngineConfig::device (null: the CPU)
};

// Throws UsageError when `cfg` asks the GPU for something this version does not do there (fp32
// compute), naming the flag: checked before any input is read.
void check_device_support(const TrainConfig& cfg, const device::DeviceSpec& spec);

// Opens the rank's device and its communicator (collective over `world` when spec is a GPU).
RunDevice open_run_device(const device::DeviceSpec& spec, std::shared_ptr<comm::Communicator> world);

}  // namespace zerodp::train
