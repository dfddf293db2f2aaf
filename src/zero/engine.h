// The ZeRO engine: trains one GPT-2 on the W ranks of a communicator, each rank reading its own
// micro-batches (contract §5), at stage 0 (plain data parallelism), 1 (optimizer state and fp32
// masters sharded), 2 (+ gradients sharded) or 3 (+ parameters sharded, each unit gathered just
// before use). One optimizer step = G micro-steps of forward/backward, gradient reduction, the
// global norm, clipping and the optimizer on the rank's shard, then parameter re-assembly.
//
// Every byte it holds is in the memory ledger under contract §9's categories; every collective it
// issues is in the traffic ledger.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "model/gpt2.h"
#include "model/layout.h"
#include "optim/optimizer.h"
#include "zero/loss_scaler.h"
#include "zero/sharding.h"

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
  optim::OptimizerSpec optimizer;  // AdamW (contract §7) or SGD
  LossScaleConfig loss_scale;
  // Testing aid: at this call of step() (0-based; -1: never) the first gradient element of unit
  // inject_overflow_unit that rank inject_overflow_rank owns becomes Inf.
  int inject_overflow_step = -1;
  int inject_overflow_rank = 0;
  int inject_overflow_unit = 0;
};

// Where initial fp32 values come from: fill dst[0..count) with elements [begin, begin+count) of unit u.
using UnitSource = std::function<void(int unit, size_t begin, size_t count, float* dst)>;
// Produces micro-step g's batch of this rank: inputs and targets, [B, T] each.
using BatchSource = std::function<void(int micro_step, int32_t* inputs, int32_t* targets)>;

struct StepResult {
  double loss = 0;        // mean token cross-entropy over the global batch
  double grad_norm = 0;   // L2 norm of the (unscaled) gradient before clipping
  // The loss or the gradient held a NaN or an Inf (on any rank). Such a step never updates
  // anything: the optimizer did not run, on any rank.
  bool nonfinite = false;
  bool skipped = false;   // the optimizer did not run (nonfinite, on every rank alike)
  // Units whose gradient held a non-finite value, ascending (filled when nonfinite and the run has
  // no loss scaling, for the message; empty when only the loss was non-finite).
  std::vector<int> nonfinite_units;
  double loss_scale = 1;  // the scale used for this step
  double comm_wait_ms = 0;  // time this rank spent blocked on communication
};

class Engine {
 public:
  Engine(const model::ParamLayout& layout, std::shared_ptr<comm::Communicator> comm, EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Sets the parameters (and fp32 masters) this rank keeps from `source`; each rank reads only
  // what it owns (its shard in stage 3).
  void load(const UnitSource& source);

  // One optimizer step over `accum` micro-steps. lr is the step's learning rate; clip > 0 clips the
  // global gradient norm (contract §6). When the global loss or gradient is not finite the step
  // changes nothing (parameters, masters, optimizer state, AdamW's t) on any rank and returns
  // nonfinite; with loss scaling (fp16) the scaler records the overflow. What to do next (stop or
  // go on) is the caller's policy.
  StepResult step(int accum, const BatchSource& batches, double lr, double clip);
  // Whether every weight this rank updates (fp32 parameters or masters) is finite, on all ranks
  // (collective): checked before anything is written to a file.
  bool weights_finite();
  // Optimizer steps taken so far (AdamW's t of the last update).
  int64_t optimizer_steps() const;

  // Calls `sink(unit, data)` on rank 0 with each unit's full fp32 parameters (the masters when the
  // compute dtype is 16-bit), unit by unit; collective: every rank must call it.
  void consolidate(const std::function<void(int unit, const float* data)>& sink);

  // ---- state for checkpoints ----------------------------------------------------------------
  // The optimizer's per-element fp32 states: AdamW m and v; SGD its momentum buffer (if any).
  int num_optimizer_states() const;
  // The rank's owned range of each unit ([own_begin, own_end) of the W-way split, whatever the
  // stage, so that the ranks' ranges tile every unit exactly once): its fp32 weights (masters for
  // 16-bit runs) and optimizer states, in unit order.
  struct OwnedRange {
    int unit;
    size_t begin, end;  // elements of the unit
    const float* weights;
    std::vector<const float*> states;  // num_optimizer_states() pointers
  };
  void visit_owned(const std::function<void(const OwnedRange&)>& visit) const;
  // Fills everything this rank keeps from a source of fp32 values: state -1 the weights, 0.. the
  // optimizer states. Reads only what the rank holds (its shard, or whole units where it keeps them).
  using StateSource = std::function<void(int state, int unit, size_t begin, size_t count, float* dst)>;
  void load_state(const StateSource& source);
  void set_optimizer_steps(int64_t steps);

  const EngineConfig& config() const { return config_; }
  const ShardLayout& shards() const { return shards_; }
  const model::ParamLayout& layout() const { return layout_; }
  comm::Communicator& comm() { return *comm_; }
  LossScaler& loss_scaler() { return scaler_; }

  struct Impl;

 private:
  const model::ParamLayout& layout_;
  std::shared_ptr<comm::Communicator> comm_;
  EngineConfig config_;
  ShardLayout shards_;
  LossScaler scaler_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerodp::zero
