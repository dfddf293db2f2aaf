// What the ZeRO engine is asked to do: the stage, the dtypes, the batch shape, the buckets and
// prefetch limits (DeepSpeed's names), the optimizer and loss scaling.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "device/device.h"
#include "optim/optimizer.h"
#include "zero/loss_scaler.h"
#include "zero/settings.h"

namespace zerodp::zero {

struct EngineConfig {
  int stage = 0;                      // 0..3
  DType dtype = DType::kF32;          // compute dtype of the parameters and gradients
  // The dtype gradients travel and are summed in, the same at every stage (unset: the compute
  // dtype). Sums are rank-ordered fp32 additions rounded once to it (comm/communicator.h), so runs
  // at the same world size agree bitwise across stages.
  std::optional<DType> reduce_dtype;
  bool fp32_grad_accum = false;       // keep the persistent gradient in fp32 (18 bytes a parameter)
  int micro_batch = 1, seq = 1;       // B, T
  size_t reduce_bucket_size = 25'000'000;      // elements per gradient bucket (stages 0-1)
  size_t allgather_bucket_size = 25'000'000;   // elements of parameters gathered at once (stages 1-2)
  bool overlap_comm = true;           // launch reductions during backward / prefetch in stage 3
  size_t stage3_max_live_parameters = 1'000'000'000;  // elements gathered (in use + prefetched) at once
  size_t stage3_prefetch_bucket_size = 50'000'000;    // elements prefetched ahead of use
  bool reshard_after_forward = true;  // stage 3: free a unit after its forward (off: FSDP SHARD_GRAD_OP)
  // Stage 3: a unit of fewer elements than this stays whole on every rank (never gathered; its
  // gradient and optimizer state are still sharded, and it is re-assembled after each update).
  size_t stage3_param_persistence_threshold = 0;
  bool activation_checkpointing = false;  // keep block inputs only; recompute blocks in backward
  // Hybrid sharding (FSDP HYBRID_SHARD, DeepSpeed MiCS): at stages 1-3 the states are sharded over
  // groups of shard_group_size consecutive ranks and replicated across the groups: gradients are
  // reduce-scattered within the group, then all-reduced across the groups on the shard; stage 3
  // gathers within the group. 0: one group of all W ranks (full sharding). Must divide W. Stage 0
  // has nothing sharded and ignores it.
  int shard_group_size = 0;
  optim::OptimizerSpec optimizer;  // AdamW (docs/reference/optimizer.md#adamw) or SGD
  // ZeRO-Offload (stages 1-3): the fp32 master copy of the rank's shard and the optimizer states
  // live in host memory (the ledger's host tier) in every compute dtype, and the update runs there,
  // sub_group_size elements of the shard at a time (DeepSpeed's sub_group_size): each sub-group's
  // gradient is copied down into a host staging buffer, updated, and its weights go back up into
  // the parameters. The same arithmetic in another place: results are bitwise those without offload.
  Offload offload_optimizer = Offload::kNone;
  size_t sub_group_size = 1'000'000'000;
  // With Offload::kNvme (ZeRO-Infinity's optimizer offload): the masters and optimizer
  // states in a file of this run's directory under nvme_path instead of host memory, brought in a
  // sub-group at a time through optimizer_buffer_count host slots (zero/optimizer_swap.h); the
  // sub-group is rounded up to a multiple of 1024 elements (whole 4 KiB blocks). Same bits.
  int optimizer_buffer_count = 4;
  std::string nvme_path;     // --nvme-path: where the run's offload directory is made
  std::string nvme_run_dir;  // that directory, filled in by the Engine (the same name on every rank)
  // ZeRO-Infinity's parameter offload (stage 3 only; Offload::kCpu or kNvme): the parameter shards of the sharded
  // units live in host memory (the ledger's host tier, category param); each gather copies the
  // shard up into a device staging buffer (category comm, alive while the gather is in flight) and
  // all-gathers from there; the optimizer writes the updated weights back into the host shard. Units
  // kept whole (stage3_param_persistence_threshold) stay on the device. Same bits as without it.
  Offload offload_param = Offload::kNone;
  // With Offload::kNvme (ZeRO-Infinity's parameter offload to NVMe; the optimizer offloaded too: the
  // update writes the parameters from host memory): the shards in a file of the run's directory
  // (zero/param_swap.h), each gather reading its shard through one of param_buffer_count host buffers
  // (offload_param.buffer_count: at most that many reads in flight, the gather in use and those
  // prefetched). The sharded units whose shards fit in param_max_in_cpu elements (offload_param.
  // max_in_cpu; taken in unit order, each unit that fits in what is left) stay in host memory as with
  // the cpu offload. Same bits.
  int param_buffer_count = 5;
  size_t param_max_in_cpu = 0;
  LossScaleConfig loss_scale;
  // Testing aid: at this call of step() (0-based; -1: never) the first gradient element of unit
  // inject_overflow_unit that rank inject_overflow_rank owns becomes Inf.
  int inject_overflow_step = -1;
  int inject_overflow_rank = 0;
  int inject_overflow_unit = 0;
  // Where the model computes and the engine's buffers live (the compute seam); null: the default
  // device (the CPU).
  device::Device* device = nullptr;
  device::Device& dev() const { return device ? *device : device::default_device(); }
  // The modes the ZeRO rules speak about (zero/settings.h).
  ZeroModes modes() const {
    return {stage, offload_optimizer, offload_param, shard_group_size, static_cast<int64_t>(sub_group_size)};
  }
};

}  // namespace zerodp::zero
