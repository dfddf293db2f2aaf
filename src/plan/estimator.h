// The planner: bytes per rank by memory category (docs/reference/metrics.md#memory), bytes each rank sends per step, and
// the largest micro-batch that fits a GPU, for a GPT-2 or a Llama (or a bare parameter count) trained by
// zerodp's engine at a ZeRO stage. docs/planner.md derives every formula.
//
// Model states follow docs/design.md's table, with Ψ counting the padding zero/sharding.h adds
// (each unit padded to W·S, S = ⌈n/W⌉ rounded up to 16 elements), so that for GPT-2 dimensions they
// equal the engine's ledger byte for byte. For a bare count (--params N) there is no padding: Ψ = N,
// and no activations.
//
// Offload: the optimizer offload is modelled as zerodp's engine does it (docs/design.md "Optimizer
// offload"): the fp32 masters of the shard (fp32 runs too) and the optimizer states leave the device,
// the host also holds a gradient staging buffer of one sub-group; the persistent gradients stay on the
// device (DeepSpeed would move its gradient partitions too). The parameter offload (ZeRO-Infinity) as
// the engine does it (docs/design.md "Parameter offload"): stage 3's parameter shards leave the
// device for the host, and each gather in flight holds one shard in a device staging buffer (comm,
// counted in `transient`).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/model_config.h"
#include "zero/settings.h"

namespace zerodp::plan {

// The engine's offload modes (zero/settings.h), which the planner models.
using zero::Offload;

// cuBLASLt's workspace on a GPU (cuda/gemm.h's GemmContext::kWorkspaceBytes; a test checks they agree).
inline constexpr uint64_t kGpuGemmWorkspaceBytes = uint64_t{32} << 20;

struct PlanInput {
  // A model's dimensions (GPT-2 or Llama: padding and activations modelled) or, when unset, a bare
  // parameter count.
  std::optional<model::ModelConfig> model;
  uint64_t params = 0;

  int world = 1;  // W ranks
  // The ZeRO settings as `zerodp train` takes them (zero/settings.h): the stage, hybrid sharding
  // (stages 1-3 shard over groups of shard_group_size ranks and replicate across the groups; stage 0
  // ignores it), the gradient buckets and stage-3 prefetch limits, activation checkpointing, and the
  // offload of the optimizer (master weights and states, stages 1-3: sub_group_size elements per update
  // round trip, the size of the host's fp32 gradient staging buffer; on nvme, optimizer_buffer_count host
  // slots, the sub-group rounded up to a multiple of 1024 elements) and of stage 3's parameter shards (on
  // nvme, param_buffer_count host buffers, and the shards of the units that fit in param_max_in_cpu
  // elements, in unit order, kept in host memory), and stage 3's units of fewer elements than
  // stage3_param_persistence_threshold, kept whole on every rank.
  zero::ZeroSettings zero;
  // The compute dtype, fp32 gradient accumulation (Megatron's 18 bytes) and the reduction dtype.
  zero::PrecisionSettings precision;
  int optimizer_states = 2;  // fp32 states a parameter: AdamW's m and v
  // Muon (zero/muon_step.h): its exchanges of each unit with a matrix and its working memory during the
  // update. Needs a model.
  bool muon = false;

  int64_t micro_batch = 1;  // B
  int64_t seq = 0;          // T; 0 means the model's n_ctx
  int64_t accum = 1;        // G micro-steps per optimizer step
  // On a GPU (--device cuda, 16-bit compute): the flash attention's activations, cuBLASLt's
  // workspace, the batch's tokens in host memory, the optimizer's larger widening chunk. Not
  // checked against a GPU's ledger.
  bool gpu = false;
  // Several hosts (zerodp estimate --ranks-per-host): L consecutive ranks on each of W/L hosts (0: all
  // on one host), and whether reduce-scatters and all-gathers run in two levels (--collectives).
  int ranks_per_host = 0;
  bool two_level = true;
  // zerodp train --async-save: each rank writing a checkpoint file holds a host copy of its owned ranges
  // while the file is written (zero/state_copy.h): the fp32 weights in the host's master, the optimizer
  // states in its optim (plan/async_copy.h).
  bool async_save = false;

  // UsageError naming the flag for anything out of range (W < 1, stage outside 0..3, T > n_ctx, an
  // offload DeepSpeed does not have at this stage, ...).
  void validate() const;
  int64_t seq_len() const { return seq > 0 ? seq : (model ? model->n_ctx() : 0); }
};

// Element counts of the model as the engine holds it.
struct ParamCounts {
  uint64_t numel = 0;   // real parameters
  uint64_t padded = 0;  // Ψ: padded over all units (= numel for a bare count)
  uint64_t shard = 0;   // Σ S: one rank's shards (Ψ/W)
  uint64_t units = 0;   // the units those are split into (1 for a bare count)
};
ParamCounts param_counts(const PlanInput& in);

struct MemoryEstimate {
  // On the GPU, per rank, at steady state (docs/reference/metrics.md#memory categories).
  uint64_t param = 0, grad = 0, master = 0, optim = 0;
  uint64_t act = 0;        // peak of `act`: activations, the engine's token buffer, its load chunk
  uint64_t transient = 0;  // peak of `gathered` + `comm` during a step (approximate, see planner.md)
  uint64_t total = 0;      // peak of everything together
  // What offload moves off the GPU, in total and by category (the memory event's host_bytes and
  // nvme_bytes): with the optimizer offloaded, master and optim there, and in the host's grad the
  // staging buffer; with the parameters offloaded, param; with --async-save, the checkpoint's host copy
  // in the host's master and optim.
  uint64_t host = 0, nvme = 0;
  struct Offloaded {
    uint64_t param = 0, grad = 0, master = 0, optim = 0;
    uint64_t total() const { return param + grad + master + optim; }
  };
  Offloaded host_by, nvme_by;
};
MemoryEstimate estimate_memory(const PlanInput& in);

// Bytes one rank sends per optimizer step in ring accounting (docs/reference/metrics.md#traffic), including the 8-byte
// scalar all-reduce of every step.
uint64_t traffic_bytes_per_step(const PlanInput& in);
// Of those, the bytes that cross a shard-group boundary (hybrid sharding: the all-reduces across the
// groups; the scalar all-reduce's bytes, which only the last rank of each group sends across, left
// out); 0 with one group.
uint64_t traffic_inter_group_bytes_per_step(const PlanInput& in);
// With ranks_per_host set: the bytes all the ranks together send to other hosts per optimizer step, as
// the metrics' bytes_sent_inter_host count them (comm/host_layout.h: two-level collectives exactly,
// the others by the ring model); 0 on one host; nullopt for hybrid sharding with shard groups other
// than the hosts (not modelled).
std::optional<uint64_t> traffic_inter_host_bytes_per_step(const PlanInput& in);

// The largest micro-batch whose total fits `gpu_bytes`; 0 when not even B = 1 fits; nullopt for a
// bare parameter count (no activations modelled).
std::optional<int64_t> max_micro_batch(const PlanInput& in, uint64_t gpu_bytes);

struct StageEstimate {
  int stage = 0;
  MemoryEstimate memory;
  uint64_t traffic_bytes = 0;
  uint64_t traffic_inter_group_bytes = 0;
  std::optional<uint64_t> traffic_inter_host_bytes;  // all ranks together; with ranks_per_host
  bool hybrid = false;  // sharded over groups smaller than W
  std::optional<int64_t> max_micro_batch;
};
// `in` at each of `stages`; an offload asked for is applied only at the stages DeepSpeed has it
// (optimizer: 1-3, parameters: 3).
std::vector<StageEstimate> estimate_stages(const PlanInput& in, const std::vector<int>& stages, uint64_t gpu_bytes);

// {"stages":[{"stage":s,"bytes_per_rank":{"param":…,"grad":…,"master":…,"optim":…,"act":…,
//  "total":…},"traffic_bytes_per_step":…,"max_micro_batch":…}]}, keys in that order; a stage that
// offloads something also has "offloaded_bytes_per_rank":{"host":{"param":…,"grad":…,"master":…,
// "optim":…,"total":…},"nvme":{…}} after max_micro_batch; with hybrid sharding (a shard group smaller
// than W) "traffic_inter_group_bytes_per_step":… follows traffic_bytes_per_step; over several hosts
// (ranks_per_host below W) "traffic_inter_host_bytes_per_step_all_ranks":… follows that.
nlohmann::ordered_json to_json(const std::vector<StageEstimate>& stages);

}  // namespace zerodp::plan
