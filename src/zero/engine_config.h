// What the ZeRO engine is asked to do: the ZeRO and precision settings as the command line resolved
// them (zero/settings.h), the optimizer, the batch shape and the device.
#pragma once

#include <cstdint>
#include <string>

#include "device/device.h"
#include "optim/optimizer.h"
#include "zero/settings.h"

namespace zerodp::zero {

struct EngineConfig {
  // The stage, buckets, prefetch limits, hybrid sharding (shard_group_size resolved to a count: it
  // must divide W; stage 0 ignores it), activation checkpointing and offload.
  ZeroSettings zero;
  PrecisionSettings precision;     // dtypes, fp32 accumulation, fp16 loss scaling
  optim::OptimizerSpec optimizer;  // AdamW (docs/reference/optimizer.md#adamw) or SGD
  int micro_batch = 1, seq = 1;    // B, T
  // Where stochastic rounding draws from (bf16 optimizer states): the run's seed, so that a resumed run
  // rounds as the uninterrupted one would.
  uint64_t seed = 0;
  // With an nvme offload: this run's directory under zero.nvme_path, filled in by the Engine (the
  // same name on every rank).
  std::string nvme_run_dir;
  // Where the model computes and the engine's buffers live (the compute seam); null: the default
  // device (the CPU).
  device::Device* device = nullptr;
  device::Device& dev() const { return device ? *device : device::default_device(); }
};

}  // namespace zerodp::zero
