// What a run asks of the ZeRO engine, as typed settings that the command line, the DeepSpeed reader,
// the planner and the engine all hold as they are (composition, never field-by-field copies):
//   - ZeroSettings: DeepSpeed's zero_optimization section (the stage, buckets, prefetch limits,
//     hybrid sharding, offload), sizes in elements as DeepSpeed counts them;
//   - PrecisionSettings: the compute dtype, the reduction dtype, fp32 gradient accumulation and
//     fp16's loss scaling.
// The rules between the modes live here once, with the messages users see: the command line's
// validation, the planner and the engine all call check_zero_modes(), none repeats a rule.
// zero_setting_rows() describes each plain setting once (its flag, DeepSpeed key, range and help):
// the flag parser, the DeepSpeed reader, the range checks and the JSON of the run all walk it, so a
// new setting is a field here, a row in settings.cpp and the code that uses it (docs/design.md,
// "Adding a setting").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "core/dtype.h"
#include "zero/loss_scaler.h"

namespace zerodp::zero {

// Where an offloaded state lives (DeepSpeed's offload_optimizer.device / offload_param.device).
enum class Offload : uint8_t { kNone, kCpu, kNvme };
// "none", "cpu", "nvme"; UsageError naming `what` (the flag or key) otherwise.
Offload parse_offload(std::string_view text, std::string_view what);
const char* offload_name(Offload o);

struct ZeroSettings {
  int stage = 0;  // 0 (replicated), 1 (optimizer states and masters sharded), 2 (+ gradients), 3 (+ parameters)
  // Elements per gradient bucket (stages 0-1) and of parameters gathered at once (stages 1-2). The
  // defaults are the engine's (25M elements), not DeepSpeed's 5e8, which would be whole-model buckets.
  int64_t reduce_bucket_size = 25'000'000;
  int64_t allgather_bucket_size = 25'000'000;
  bool overlap_comm = true;          // launch reductions during backward / prefetch in stage 3
  // With overlap_comm: the gradient reductions left in flight while the backward goes on, each
  // holding its unit's buffers; fewer overlap less and hold less memory. zerodp's own key.
  int64_t max_reductions_in_flight = 3;
  bool contiguous_gradients = true;  // accepted for DeepSpeed: the gradients always are contiguous
  int64_t stage3_prefetch_bucket_size = 50'000'000;   // elements prefetched ahead of use
  int64_t stage3_max_live_parameters = 1'000'000'000;  // elements gathered (in use + prefetched) at once
  // Stage 3: a unit of fewer elements stays whole on every rank (never gathered; its gradient and
  // optimizer state are still sharded, and it is re-assembled after each update). zerodp shards whole
  // units (a block or the embeddings), not single tensors as DeepSpeed does: its default is 0.
  int64_t stage3_param_persistence_threshold = 0;
  bool reshard_after_forward = true;  // stage 3: free a unit after its forward (off: FSDP's SHARD_GRAD_OP)
  // Hybrid sharding (FSDP's HYBRID_SHARD, DeepSpeed's MiCS mics_shard_size): at stages 1-3 the states
  // are sharded over groups of this many consecutive ranks and replicated across the groups: gradients
  // are reduce-scattered within the group, then all-reduced across the groups on the shard; stage 3
  // gathers within the group. 0: one group of all ranks (full sharding); kShardGroupNode: the ranks of
  // each host, resolved to a count (train/trainer) before the rules and the engine see it.
  static constexpr int64_t kShardGroupNode = -1;
  int64_t shard_group_size = 0;
  bool activation_checkpointing = false;  // keep block inputs only; recompute blocks in backward
  // Tokens the classifier (logits, softmax, cross-entropy) computes at a time, so that only
  // loss_chunk × vocabulary logits exist at once; the backward computes each chunk's again
  // (model::ActivationSettings). 0: the whole micro-batch at once. zerodp's own key.
  int64_t loss_chunk = 0;
  // Tokens each block's MLP computes at a time, so that its hidden layer and that layer's gradient exist
  // for mlp_chunk rows only; the backward computes each chunk's hidden layer again
  // (model::ActivationSettings). 0: the whole micro-batch at once. zerodp's own key.
  int64_t mlp_chunk = 0;
  // ZeRO-Offload (stages 1-3): the fp32 masters of the rank's shard and the optimizer states in host
  // memory (cpu) or in files of the run's directory under nvme_path (nvme), the update run on the host
  // sub_group_size elements of the shard at a time; with nvme through optimizer_buffer_count host slots
  // (zero/optimizer_swap.h; the sub-group rounded up to whole 4 KiB blocks). Same bits as without.
  Offload offload_optimizer = Offload::kNone;
  int64_t sub_group_size = 1'000'000'000;
  int64_t optimizer_buffer_count = 4;
  std::string nvme_path;  // where an nvme offload makes the run's directory
  // ZeRO-Infinity's parameter offload (stage 3): the parameter shards of the sharded units in host
  // memory (cpu) or in files (nvme, with the optimizer offloaded too), copied up to the device for each
  // gather. With nvme: param_buffer_count host buffers the gathers read through, and the shards of the
  // units that fit in param_max_in_cpu elements (taken in unit order) kept in host memory. Same bits.
  Offload offload_param = Offload::kNone;
  int64_t param_buffer_count = 5;
  int64_t param_max_in_cpu = 0;
  // ZeRO++ (stage 3, DeepSpeed's keys). qwZ: each unit's parameters are all-gathered as int8 blocks
  // with fp32 scales (core/quantize.h) and computed with dequantized, so the numbers change; the
  // shards, masters and checkpoints stay exact. hpZ: a secondary copy of each unit's gathered
  // parameters, sharded over groups of zero_hpz_partition_size consecutive ranks (a host), is kept from
  // the unit's forward to its backward, whose gather then stays within the group (category gathered;
  // the same bits as without). 1: off.
  bool zero_quantized_weights = false;
  int64_t zero_hpz_partition_size = 1;
  // qgZ (stages 2-3): the gradient reduce-scatters send what crosses hosts as int8 blocks
  // (Communicator::reduce_scatter_quantized_async): exact within a host and wherever the collectives
  // run flat.
  bool zero_quantized_gradients = false;
};

// UsageError, naming the flags and DeepSpeed keys involved, when the modes do not go together:
//   - the stage is 0, 1, 2 or 3;
//   - an optimizer offload needs a sharded optimizer (stage >= 1);
//   - a parameter offload needs sharded parameters (stage 3);
//   - parameters on nvme need the optimizer offloaded too (the host-side update writes them);
//   - a shard group is a count of ranks that divides the world size;
// and, for every row of zero_setting_rows(), when the value is out of the row's range.
void check_zero_modes(const ZeroSettings& zero, int world_size);

// The ranks each state is sharded over: the shard group at stages 1-3 with hybrid sharding, else all.
int shard_group_ranks(const ZeroSettings& zero, int world_size);

struct PrecisionSettings {
  DType dtype = DType::kF32;  // compute dtype of parameters, activations and gradients
  // The dtype gradients travel and are summed in, the same at every stage (unset: the compute dtype).
  // Sums are rank-ordered fp32 additions rounded once to it (comm/communicator.h), so runs at the same
  // world size agree bitwise across stages.
  std::optional<DType> reduce_dtype;
  // Accumulate micro-step gradients in a persistent fp32 buffer under bf16/fp16 (18 bytes a parameter
  // instead of 16). Off here; `zerodp train` turns it on by default.
  bool fp32_grad_accum = false;
  LossScaleConfig loss_scale;  // fp16's (DeepSpeed's fp16 section); other dtypes never scale
  // The optimizer's states (AdamW's m and v, SGD's and Muon's momentum) kept in bf16, 2 bytes a state
  // instead of 4 (DeepSpeed's bf16.bf16_optimizer_states): the update widens them to fp32 and rounds
  // them back stochastically (core/stochastic_round.h), from the run's seed.
  bool bf16_optimizer_states = false;
  // bf16 compute without fp32 master weights (DeepSpeed's bf16.bf16_master_weights_and_grads, which also
  // keeps the gradients in bf16): the update widens the parameters to fp32 and rounds them back
  // stochastically, as it does the bf16 states.
  bool bf16_master_weights = false;

  DType grad_reduce_dtype() const { return reduce_dtype.value_or(dtype); }
  // The dtype of the gradient kept across micro-steps: fp32 when computing in it or accumulating in it.
  DType grad_store_dtype() const { return dtype == DType::kF32 || fp32_grad_accum ? DType::kF32 : dtype; }
  bool accumulates_in_fp32() const { return dtype != DType::kF32 && fp32_grad_accum; }
  bool reduces_in_fp32() const { return dtype != DType::kF32 && grad_reduce_dtype() == DType::kF32; }
  bool scales_loss() const { return dtype == DType::kF16; }
  DType state_dtype() const { return bf16_optimizer_states ? DType::kBF16 : DType::kF32; }
  // Whether fp32 master weights are kept beside 16-bit parameters (the optimizer offloaded keeps them anyway).
  bool fp32_masters() const { return dtype != DType::kF32 && !bf16_master_weights; }
};

// ---- the table of plain settings ---------------------------------------------------------------

// One setting of ZeroSettings as users spell it: a flag, a key under zero_optimization, a range.
struct ZeroSettingRow {
  std::string_view flag;        // "--reduce-bucket-size"; empty: a DeepSpeed key only
  std::string_view value_name;  // "N"; empty for switches
  std::string_view ds_key;      // "reduce_bucket_size", "offload_param.buffer_count"; empty: a flag only
  std::string_view json_key;    // its name in the run's settings JSON (TrainConfig::to_json's "zero"); empty: elsewhere
  std::string_view help;
  // The field it sets. Counts are bounded by [min, max].
  std::variant<int ZeroSettings::*, int64_t ZeroSettings::*, bool ZeroSettings::*, Offload ZeroSettings::*> field;
  int64_t min = 0, max = INT64_MAX;
  // Whether `zerodp estimate` takes the flag too (the planner models the setting).
  bool planner = false;
};
std::span<const ZeroSettingRow> zero_setting_rows();
// The row whose flag (or key under zero_optimization) is this; null when none.
const ZeroSettingRow* find_zero_setting_by_flag(std::string_view flag);
const ZeroSettingRow* find_zero_setting_by_key(std::string_view ds_key);
// How messages name the row: "--x (zero_optimization.y)", or the one of the two it has.
std::string zero_setting_label(const ZeroSettingRow& row);
// Sets the row's field from a flag's text (a switch takes true/false, 1/0, yes/no, on/off).
// UsageError naming the flag when the text does not parse; the range is check_zero_modes()'s.
void set_zero_setting(ZeroSettings& zero, const ZeroSettingRow& row, std::string_view text);
// The row's value as its flag would take it.
std::string zero_setting_text(const ZeroSettings& zero, const ZeroSettingRow& row);
bool is_switch(const ZeroSettingRow& row);

}  // namespace zerodp::zero
