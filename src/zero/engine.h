// The ZeRO engine: trains one model (any architecture behind the model seam, model/model.h) on the W
// ranks of a communicator, each rank reading its own micro-batches (docs/reference/data-order.md#ranks),
// at stage 0 (plain data parallelism), 1 (optimizer state and fp32 masters sharded), 2 (+ gradients
// sharded) or 3 (+ parameters sharded, each unit gathered just before use). With hybrid sharding
// (EngineConfig::shard_group_size N) stages 1-3 shard over groups of N consecutive ranks and replicate
// across the W/N groups. One optimizer step = G micro-steps of forward/backward, gradient reduction,
// the global norm, clipping and the optimizer on the rank's shard, then parameter re-assembly.
//
// Every byte it holds is in the memory ledger under the categories of docs/reference/metrics.md#memory;
// every collective it issues is in the traffic ledger.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "model/layout.h"
#include "optim/optimizer.h"
#include "zero/engine_config.h"
#include "zero/fault.h"
#include "zero/loss_scaler.h"
#include "zero/sharding.h"
#include "zero/state_io.h"

namespace zerodp::zero {

// Where initial fp32 values come from: fill dst[0..count) with elements [begin, begin+count) of unit u.
using UnitSource = std::function<void(int unit, size_t begin, size_t count, float* dst)>;
// Produces micro-step g's batch of this rank: inputs and targets, [B, T] each.
using BatchSource = std::function<void(int micro_step, int32_t* inputs, int32_t* targets)>;
// Packed sequences: fills micro-step g's positions [B, T] (model/model.h); absent (empty): every row
// is one sequence.
using PositionSource = std::function<void(int micro_step, int32_t* positions)>;
// Produces evaluation pass p's batch of this rank: inputs and targets, [B, T] each.
using EvalSource = std::function<void(uint64_t pass, int32_t* inputs, int32_t* targets)>;

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
  // global gradient norm (docs/reference/model.md#loss). When the global loss or gradient is not finite the step
  // changes nothing (parameters, masters, optimizer state, AdamW's t) on any rank and returns
  // nonfinite; with loss scaling (fp16) the scaler records the overflow. What to do next (stop or
  // go on) is the caller's policy. The loss is the sum of the global batch's token losses over
  // `targets`, the number of positions with a target in it (instruction data: those not
  // kIgnoreTarget; 0 means every position, W·G·B·T), whatever the split (docs/reference/data-order.md).
  StepResult step(int accum, const BatchSource& batches, double lr, double clip, uint64_t targets = 0,
                  const PositionSource& positions = {});
  // Forward passes only (validation, docs/reference/data-order.md#validation): `passes` micro-batches of B sequences of T tokens
  // from `batches`, each through the model's forward in the compute dtype, as training's forward
  // computes. Returns every sequence's summed token cross-entropy in double, B a pass, in pass order.
  // No gradient, no optimizer, no loss-scale or step count: training after it is bitwise what it would
  // have been. Collective: every rank calls it with the same `passes` (stage 3 gathers each unit
  // before its forward and releases every gathered unit after each pass, the head's unit 0 included).
  // Its collectives are kept out of the traffic ledger (docs/reference/metrics.md#traffic counts training's); its
  // memory is the training forward's (activations, stage 3's gathered units), nothing persistent.
  std::vector<double> evaluate(uint64_t passes, const EvalSource& batches);
  // Whether every weight this rank updates (fp32 parameters or masters) is finite, on all ranks
  // (collective): checked before anything is written to a file.
  bool weights_finite();
  // Optimizer steps taken so far (AdamW's t of the last update).
  int64_t optimizer_steps() const;
  // With the optimizer offloaded to NVMe: this rank's bytes read from and written to its offload
  // file so far (loading and checkpoints included), and the seconds its offloaded updates took (the
  // I/O of an update overlaps it); zeros otherwise.
  struct NvmeTraffic {
    uint64_t bytes_read = 0, bytes_written = 0;
    uint64_t update_bytes = 0;  // of those, moved by the updates
    double update_seconds = 0;
  };
  NvmeTraffic nvme_traffic() const;

  // Calls `sink(unit, data)` on rank 0 with each unit's full fp32 parameters (the masters when the
  // compute dtype is 16-bit), unit by unit; collective: every rank must call it.
  void consolidate(const std::function<void(int unit, const float* data)>& sink);

  // ---- state for checkpoints ----------------------------------------------------------------
  // The optimizer's per-element fp32 states: AdamW m and v; SGD its momentum buffer (if any).
  int num_optimizer_states() const;
  // The rank's owned range of each unit ([own_begin, own_end) of the W-way split, whatever the
  // stage, so that the ranks' ranges tile every unit exactly once): its fp32 weights (masters for
  // 16-bit runs) and optimizer states, in unit order. The pointers are valid during the visit's call
  // only (with the optimizer on NVMe, the unit's states are read into host memory for it).
  struct OwnedRange {
    int unit;
    size_t begin, end;  // elements of the unit
    const float* weights;
    std::vector<const float*> states;  // num_optimizer_states() pointers
  };
  void visit_owned(const std::function<void(const OwnedRange&)>& visit) const;
  // The same ranges copied into host memory the caller owns, straight from where they live (no staging):
  // the i-th non-empty range's weights to into[i].weights, its state k to into[i].states[k], each
  // end - begin floats (zero/state_copy.h lays them out for the checkpoint's writer). Done when it returns.
  struct OwnedCopy {
    float* weights;
    std::vector<float*> states;  // num_optimizer_states() pointers
  };
  void copy_owned(const std::vector<OwnedCopy>& into) const;
  // visit_owned's non-empty ranges pointing at the engine's own memory, where that is fp32 host memory
  // (the CPU device; nothing on NVMe; fp32 weights and states): valid, and unchanged, until the
  // before_state_change hook is called. Empty elsewhere (a GPU, NVMe, 16-bit weights or states).
  std::vector<OwnedRange> owned_in_place() const;
  // Called on this thread before anything changes what visit_owned gives (the optimizer's update, a
  // load), so that a reader of owned_in_place()'s memory on another thread can finish with it first
  // (train/async_save.h). One hook at a time; an empty function removes it.
  void set_before_state_change(std::function<void()> hook);
  // Fills everything this rank keeps from a source of fp32 values: state -1 the weights, 0.. the
  // optimizer states. Reads only what the rank holds (its shard, or whole units where it keeps them).
  using StateSource = zero::StateSource;
  void load_state(const StateSource& source);
  void set_optimizer_steps(int64_t steps);
  // For the tests of the non-finite paths: the fault the steps to come inject (zero/fault.h).
  void set_gradient_fault(const GradientFault& fault);

  const EngineConfig& config() const;
  // The rank's shard layout: N-way (its shard group), rank() % N.
  const ShardLayout& shards() const;
  // Hybrid sharding: N, the ranks of one shard group (W without it), and which group this rank is in
  // (its replica index: rank() / N).
  int shard_group_size() const;
  int replica() const;
  const model::ParamLayout& layout() const;
  comm::Communicator& comm();
  LossScaler& loss_scaler();

 private:
  // Everything the engine holds and does (engine.cpp); each method above forwards to it.
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerodp::zero
