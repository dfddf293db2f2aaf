// Where one rank's persistent model states live (docs/reference/metrics.md#memory: param, grad, master, optim) and
// where a unit's element i is in each of them at the engine's stage:
//
//   param  compute dtype; whole units at stages 0-2 (and stage-3 units kept whole), else the shard
//   grad   stages 0-1: whole units (full index); stages 2-3: the shard (shard index)
//   master fp32, 16-bit runs only: whole at stage 0, else the shard
//   optim  states (AdamW m, v; SGD momentum) in fp32, or bf16 with bf16_optimizer_states: whole at
//          stage 0, else the shard
//
// With optimizer offload (stages 1-3) master and optim are in the host tier, and master exists in
// fp32 runs too (the host's copy of the shard that the optimizer updates); a host staging buffer
// (category grad, two sub-groups of fp32 values: one shard's worth at most) receives the gradients the
// update reads. The
// persistent gradients stay on the device (DeepSpeed keeps its gradient partitions on the host too).
//
// With parameter offload (stage 3) the parameter shards of the sharded units are in the host tier
// (param_host, category param; to NVMe: those of the units max_in_cpu keeps there, the others in
// param_swap's file); param_store keeps only the units stage 3 keeps whole, on the device,
// since the model reads them in place every micro-step. A sharded unit's shard is copied up into a
// device staging buffer for its all-gather (param_gatherer.h); the optimizer's updated weights are
// written into param_host. param_at() reaches a unit's parameters wherever they are.
//
// With the optimizer offloaded to NVMe, master and optim are in a file instead (swap,
// zero/optimizer_swap.h): weights_at and state_at reach nothing but while a StatesInHost brings
// one unit's part of the shard in (loading, checkpoints, consolidation); the update reaches them a
// sub-group at a time, through the swap's slots.
//
// The engine owns one ModelStates; its parts (gradient reduction, parameter gathering, the optimizer
// step, state I/O) reach the bytes through its accessors, by unit and element, and never hold a
// buffer of it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "model/layout.h"
#include "model/model.h"
#include "zero/engine_config.h"
#include "zero/offload_rules.h"
#include "zero/optimizer_swap.h"
#include "zero/param_swap.h"
#include "zero/sharding.h"

namespace zerodp::zero {

// Working memory for loading, for widening 16-bit gradients and for gathering fp32 weights is
// bounded by this many elements, so that it stays small beside the activations whatever the unit
// sizes.
constexpr size_t kWorkChunk = size_t{1} << 18;
// The optimizer's elements per update call on a device the host does not address (a GPU): each call
// is a kernel launch, so fewer and larger ones (16 MiB of widened fp32 gradient at most).
constexpr size_t kDeviceWorkChunk = size_t{1} << 22;
// The engine's micro-batch in host-visible memory (`act`), filled by the batch source: B·T input ids,
// targets and positions (int32 each).
constexpr uint64_t batch_token_bytes(uint64_t B, uint64_t T) { return 3 * sizeof(int32_t) * B * T; }
// How the engine's model keeps its activations: what the planner's activation count is asked for too.
inline model::ActivationSettings activation_settings(const ZeroSettings& zero) {
  return {zero.activation_checkpointing, zero.loss_chunk, zero.mlp_chunk};
}

class ModelStates {
 public:
  ModelStates(const model::ParamLayout& layout, const ShardLayout& shards, const EngineConfig& config);
  ModelStates(const ModelStates&) = delete;
  ModelStates& operator=(const ModelStates&) = delete;

  // ---- the modes, fixed at construction ---------------------------------------------------------
  const model::ParamLayout& layout() const { return layout_; }
  const ShardLayout& shards() const { return shards_; }
  device::Device& dev() const { return dev_; }  // where the states live (the host tier's: dev().host())
  int num_units() const { return layout_.num_units(); }
  const UnitShard& unit(int u) const { return shards_.unit(u); }
  int ranks() const { return shards_.world(); }  // N: the ranks the states are sharded over
  int rank() const { return shards_.rank(); }    // this rank's shard, of N
  int stage() const { return stage_; }
  DType param_dtype() const { return param_dtype_; }  // parameters (compute dtype)
  DType grad_dtype() const { return grad_dtype_; }  // persistent gradients
  bool mixed() const { return mixed_; }  // 16-bit compute: the parameters in bf16 or fp16
  bool offload() const { return offload_; }  // optimizer offload: master, optim (and grad staging) in host memory
  // An fp32 master copy exists: 16-bit compute (unless bf16_master_weights), or offload.
  bool has_master() const { return has_master_; }
  // The weights the optimizer updates: the fp32 masters, or the parameters themselves (fp32, or bf16 with
  // bf16_master_weights).
  DType weights_dtype() const { return has_master_ ? DType::kF32 : param_dtype_; }
  int num_states() const { return num_states_; }  // optimizer states per element
  DType state_dtype() const { return state_dtype_; }  // fp32, or bf16 (PrecisionSettings::bf16_optimizer_states)
  size_t sub_group() const { return sub_group_; }  // offload: shard elements updated per round trip
  // Offload: sub-group buffers in the gradient staging: two (one coming down while the other is
  // updated) when the shard has two sub-groups or more.
  size_t grad_staging_buffers() const { return offload_grad_staging_buffers(shards_.total_shard(), sub_group_); }

  // ---- where unit u's element i is ---------------------------------------------------------------
  // The range of unit u's elements this rank updates: all of them at stage 0, its shard otherwise.
  std::pair<size_t, size_t> update_range(int u) const {
    if (stage_ == 0) return {0, shards_.unit(u).numel};
    return {shards_.unit(u).own_begin, shards_.unit(u).own_end};
  }
  // Unit u's first element in the shard-sized buffers (the units' shards end to end).
  size_t shard_offset(int u) const { return shard_off_[u]; }
  size_t full_index(int u, size_t i) const { return shards_.unit(u).offset + i; }
  size_t shard_index(int u, size_t i) const {
    return shard_off_[u] + i - static_cast<size_t>(rank()) * shards_.unit(u).shard;
  }
  size_t grad_index(int u, size_t i) const { return stage_ <= 1 ? full_index(u, i) : shard_index(u, i); }
  size_t state_index(int u, size_t i) const { return stage_ == 0 ? full_index(u, i) : shard_index(u, i); }
  size_t param_index(int u, size_t i) const {
    return param_off_[u] + (param_whole_[u] ? i : i - static_cast<size_t>(rank()) * shards_.unit(u).shard);
  }
  // The parameter store holds all of unit u (stages 0-2; persistent stage-3 units).
  bool param_whole(int u) const { return param_whole_[u]; }
  // Unit u's parameters are in host memory (an offloaded shard), not the device's store.
  bool param_on_host(int u) const { return param_in_host_[u]; }
  // Unit u's shard is in param_swap()'s file (read and written through it, never param_at).
  bool param_on_nvme(int u) const { return param_nvme_ && !param_whole_[u] && !param_in_host_[u]; }

  // ---- the bytes ---------------------------------------------------------------------------------
  // Who writes them:
  //   param          load_states (state_io.h), ShardOptimizer's update, ParamGatherer's re-assembly
  //   grad           the model's backward (the engine's units), GradReducer, the engine's finish_grad
  //   master, optim  load_states, ShardOptimizer's update (with NVMe, through optimizer_swap())
  //   grad staging   ShardOptimizer's offloaded update
  char* param_at(int u, size_t i) {
    return (param_on_host(u) ? param_host_ : param_store_).as<char>() + param_index(u, i) * dtype_size(param_dtype_);
  }
  char* grad_at(int u, size_t i) { return grad_store_.as<char>() + grad_index(u, i) * dtype_size(grad_dtype_); }
  const char* grad_at(int u, size_t i) const {
    return grad_store_.as<char>() + grad_index(u, i) * dtype_size(grad_dtype_);
  }
  // The rank's shard of unit u, [rank()·S, (rank()+1)·S) of its elements: where the reductions leave
  // the rank's sum and the gathers send from.
  char* param_shard(int u) { return param_at(u, static_cast<size_t>(rank()) * shards_.unit(u).shard); }
  char* grad_shard(int u) { return grad_at(u, static_cast<size_t>(rank()) * shards_.unit(u).shard); }
  // The weights the optimizer updates, in weights_dtype(): the masters (16-bit runs, offload) or the
  // parameters themselves.
  char* weights_bytes(int u, size_t i) {
    if (has_master_)
      return master_.as<char>() + (stage_ == 0 ? full_index(u, i) : shard_index(u, i) - window_first_) * sizeof(float);
    return param_at(u, i);
  }
  // The same where they are fp32 (everywhere but bf16_master_weights).
  float* weights_at(int u, size_t i) {
    ZDP_CHECK(weights_dtype() == DType::kF32, "fp32 access to {} weights", dtype_name(weights_dtype()));
    return reinterpret_cast<float*>(weights_bytes(u, i));
  }
  // Optimizer state k (0: m or momentum, 1: v) of unit u's element i, in state_dtype().
  char* state_bytes(int k, int u, size_t i) {
    return (k == 0 ? opt_m_ : opt_v_).as<char>() + (state_index(u, i) - window_first_) * dtype_size(state_dtype_);
  }
  // The same where the states are fp32 (everywhere but bf16_optimizer_states).
  float* state_at(int k, int u, size_t i) {
    ZDP_CHECK(state_dtype_ == DType::kF32, "fp32 access to {} optimizer states", dtype_name(state_dtype_));
    return reinterpret_cast<float*>(state_bytes(k, u, i));
  }
  // Offload: gradient staging buffer k (< grad_staging_buffers()) of sub_group() fp32 values.
  float* grad_staging(size_t k) { return grad_staging_.as<float>() + k * sub_group_; }
  // Optimizer offload to NVMe: the file of masters and optimizer states; null otherwise.
  OptimizerSwap* optimizer_swap() const { return swap_.get(); }
  // Parameter offload to NVMe: the file of the shards param_on_nvme() names; null otherwise.
  ParamSwap* param_swap() const { return param_swap_.get(); }

  // The bytes of each store, as allocated.
  struct Footprint {
    size_t param, param_host, grad, master, optim_m, optim_v, grad_staging;
  };
  Footprint footprint() const;
  // Moves every buffer into `keep` (the engine parks them when it fails with collectives in flight).
  void park(std::vector<Buffer>& keep);

 private:
  friend class StatesInHost;  // moves the NVMe window (window_first_, master_, opt_m_, opt_v_)

  const model::ParamLayout& layout_;
  const ShardLayout& shards_;
  device::Device& dev_;
  const int stage_;
  const DType param_dtype_, grad_dtype_;
  const bool mixed_, offload_, has_master_;
  const int num_states_;
  const DType state_dtype_;
  const bool optim_nvme_;  // optimizer offload to NVMe: master and optim in swap_'s file
  const bool param_nvme_;  // parameter offload to NVMe: the sharded units' shards in param_swap_'s file
  const size_t sub_group_;

  Buffer param_store_, master_, grad_store_, opt_m_, opt_v_;
  Buffer param_host_;  // parameter offload: the sharded units' shards, compute dtype, in host memory
  Buffer grad_staging_;  // offload: fp32 gradients of grad_staging_buffers() sub-groups, in host memory
  std::unique_ptr<OptimizerSwap> swap_;  // optimizer offload to NVMe
  std::unique_ptr<ParamSwap> param_swap_;  // parameter offload to NVMe
  size_t window_first_ = 0;  // NVMe: the shard element master_[0] (opt_m_[0], opt_v_[0]) holds
  std::vector<size_t> shard_off_;  // unit u's first element in the shard-sized buffers
  std::vector<size_t> param_off_;  // unit u's first element in param_store_ (param_host_: offloaded shards)
  std::vector<bool> param_whole_;
  std::vector<bool> param_in_host_;
};

// NVMe optimizer offload: unit u's masters and optimizer states (the blocks of the file that hold
// its part of the shard) in host memory, where weights_at and state_at find them, while this lives;
// write_back() sends changes to the file first. Does nothing for the other modes.
class StatesInHost {
 public:
  StatesInHost(ModelStates& st, int u);
  ~StatesInHost();  // frees them, unwritten
  StatesInHost(const StatesInHost&) = delete;
  StatesInHost& operator=(const StatesInHost&) = delete;
  void write_back();

 private:
  ModelStates& states_;
};

}  // namespace zerodp::zero
