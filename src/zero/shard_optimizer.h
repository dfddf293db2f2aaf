// The optimizer step over the rank's shard: AdamW (docs/reference/optimizer.md#adamw), SGD or Muon
// (its matrices through zero/muon_step.h, its other tensors by AdamW) on the fp32 weights it
// updates (the masters of 16-bit runs, else the parameters) with the gradient it keeps (widened
// chunk by chunk when stored in 16 bits), unit by unit and tensor by tensor (weight decay applies
// to tensors of two or more dimensions); 16-bit parameters are then rounded from the updated
// masters. Re-assembling the full parameters on every rank is ParamGatherer's.
//
// With optimizer offload the same update runs on the host copies (model_states.h) in sub-groups of
// the shard: gradient down, update on the host, weights back up (shard_optimizer_offload.cpp).
#pragma once

#include <cstdint>

#include "zero/engine_config.h"
#include "comm/communicator.h"
#include "zero/model_states.h"
#include "zero/muon_step.h"

namespace zerodp::zero {

class ShardOptimizer {
 public:
  // group: the shard group, which Muon's exchanges run over.
  ShardOptimizer(ModelStates& states, comm::Communicator& group, const EngineConfig& config)
      : states_(states), cfg_(config), muon_(states, group) {}

  // One update at learning rate lr, the gradient multiplied by grad_scale first (unscaling and
  // clipping in one factor).
  void update(double lr, float grad_scale);

  int64_t steps() const { return steps_; }  // updates applied (AdamW's t of the last one)
  // NVMe offload: seconds the offloaded updates took, and the file bytes they moved.
  double offload_seconds() const { return offload_seconds_; }
  uint64_t offload_io_bytes() const { return offload_io_bytes_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  // The offloaded update (shard_optimizer_offload.cpp); t is AdamW's step count.
  void update_offloaded(double lr, float grad_scale, int64_t t);
  class Chunk;  // the update's widened chunks (shard_optimizer.cpp)

  ModelStates& states_;
  const EngineConfig cfg_;  // a copy: the part may outlive the caller's config
  MuonStep muon_;
  int64_t steps_ = 0;
  double offload_seconds_ = 0;
  uint64_t offload_io_bytes_ = 0;
};

}  // namespace zerodp::zero
