// Where one rank's persistent model states live (docs/reference/metrics.md#memory: param, grad, master, optim) and
// where a unit's element i is in each of them at the engine's stage:
//
//   param  compute dtype; whole units at stages 0-2 (and stage-3 units kept whole), else the shard
//   grad   stages 0-1: whole units (full index); stages 2-3: the shard (shard index)
//   master fp32, 16-bit runs only: whole at stage 0, else the shard
//   optim  fp32 states (AdamW m, v; SGD momentum): whole at stage 0, else the shard
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
// zero/optimizer_swap.h): master, opt_m and opt_v are empty but while a StatesInHost brings one
// unit's part of the shard in (loading, checkpoints, consolidation), from shard element
// window_first on; the update reaches them a sub-group at a time, through the swap's slots.
//
// The engine's parts (gradient reduction, parameter gathering, the optimizer step, state I/O)
// share one ModelStates and reach the bytes only through it.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "model/layout.h"
#include "zero/config.h"
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

struct ModelStates {
  ModelStates(const model::ParamLayout& layout, const ShardLayout& shards, const EngineConfig& config);

  const model::ParamLayout& layout;
  const ShardLayout& sh;
  device::Device& dev;  // where the states live (the host tier ones too: its allocate_host)
  const int W, r, stage;
  const DType pdt;  // parameters (compute dtype)
  const DType gdt;  // persistent gradients
  const bool mixed;  // 16-bit compute: fp32 masters beside the parameters
  const bool offload;  // optimizer offload: master, optim (and the gradient staging) in host memory
  const bool has_master;  // an fp32 master copy exists: 16-bit compute, or offload
  const bool offload_param;  // parameter offload: the sharded units' parameter shards in host memory
  const int num_states;  // fp32 optimizer states per element
  const bool optim_nvme;  // optimizer offload to NVMe: master and optim in swap's file
  const bool param_nvme;  // parameter offload to NVMe: the sharded units' shards in param_swap's file
  const size_t sub_group;  // offload: shard elements updated per round trip (staging size)

  Buffer param_store, master, grad_store, opt_m, opt_v;
  Buffer param_host;  // parameter offload: the sharded units' shards, compute dtype, in host memory
  Buffer grad_staging;  // offload: fp32 gradients of grad_staging_buffers() sub-groups, in host memory
  std::unique_ptr<OptimizerSwap> swap;  // optimizer offload to NVMe
  std::unique_ptr<ParamSwap> param_swap;  // parameter offload to NVMe
  size_t window_first = 0;  // NVMe: the shard element master[0] (opt_m[0], opt_v[0]) holds
  std::vector<size_t> shard_off;  // unit u's first element in the shard-sized buffers
  std::vector<size_t> param_off;  // unit u's first element in param_store (param_host: offloaded shards)
  std::vector<bool> param_whole;  // param_store holds all of unit u (stages 0-2; persistent stage-3 units)
  std::vector<bool> param_in_host;  // param_host holds unit u's shard (parameter offload)

  int num_units() const { return layout.num_units(); }
  // Offload: sub-group buffers in grad_staging: two (one coming down while the other is updated)
  // when the shard has two sub-groups or more.
  size_t grad_staging_buffers() const { return sh.total_shard() > sub_group ? 2 : 1; }
  const UnitShard& unit(int u) const { return sh.unit(u); }

  size_t full_index(int u, size_t i) const { return sh.unit(u).offset + i; }
  size_t shard_index(int u, size_t i) const { return shard_off[u] + i - static_cast<size_t>(r) * sh.unit(u).shard; }
  size_t grad_index(int u, size_t i) const { return stage <= 1 ? full_index(u, i) : shard_index(u, i); }
  size_t state_index(int u, size_t i) const { return stage == 0 ? full_index(u, i) : shard_index(u, i); }
  size_t param_index(int u, size_t i) const {
    return param_off[u] + (param_whole[u] ? i : i - static_cast<size_t>(r) * sh.unit(u).shard);
  }
  // True when unit u's parameters are in param_host (offloaded shard), not param_store.
  bool param_on_host(int u) const { return param_in_host[u]; }
  // True when unit u's shard is in param_swap's file (read and written through it, never param_at).
  bool param_on_nvme(int u) const { return param_nvme && !param_whole[u] && !param_in_host[u]; }
  // fp32 weights the optimizer updates: the masters (16-bit runs, offload) or the parameters themselves.
  float* weights_at(int u, size_t i) {
    if (has_master) return master.as<float>() + (stage == 0 ? full_index(u, i) : shard_index(u, i) - window_first);
    return reinterpret_cast<float*>(param_at(u, i));
  }
  char* param_at(int u, size_t i) {
    return (param_on_host(u) ? param_host : param_store).as<char>() + param_index(u, i) * dtype_size(pdt);
  }
  char* grad_at(int u, size_t i) { return grad_store.as<char>() + grad_index(u, i) * dtype_size(gdt); }
  // Optimizer state k (0: m or momentum, 1: v) of unit u's element i.
  float* state_at(int k, int u, size_t i) {
    return (k == 0 ? opt_m : opt_v).as<float>() + state_index(u, i) - window_first;
  }
  // The range of unit u's elements this rank updates: all of them at stage 0, its shard otherwise.
  std::pair<size_t, size_t> update_range(int u) const {
    if (stage == 0) return {0, sh.unit(u).numel};
    return {sh.unit(u).own_begin, sh.unit(u).own_end};
  }
};

// NVMe optimizer offload: unit u's masters and optimizer states (the blocks of the file that hold
// its part of the shard) in host memory, in ModelStates::master, opt_m, opt_v where weights_at and
// state_at find them, while this lives; write_back() sends changes to the file first. Does nothing
// for the other modes.
class StatesInHost {
 public:
  StatesInHost(ModelStates& st, int u);
  ~StatesInHost();  // frees them, unwritten
  StatesInHost(const StatesInHost&) = delete;
  StatesInHost& operator=(const StatesInHost&) = delete;
  void write_back();

 private:
  ModelStates& st_;
};

}  // namespace zerodp::zero
