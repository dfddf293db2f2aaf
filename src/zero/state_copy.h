// The host copy of a rank's checkpoint state that an asynchronous save (train/async_save.h) takes at a
// step boundary, so that training goes on while a background thread writes the copy to its file, and
// the rule for its bytes, which the planner (plan/estimator.h, --async-save) calls too.
//
// The copy holds, for every unit, the rank's owned range of the fp32 weights (the masters of 16-bit
// runs) and of each optimizer state, each range in a slot of the unit's shard size S, the slots end to
// end: Σ S elements an array (ShardLayout::total_shard()), so that every rank of a shard group holds
// the same bytes, whichever owns the unit's padding. In the ledger's host tier (a GPU's page-locked
// memory), the weights under `master` and the states under `optim`: the same categories as the
// engine's own copies, so the metrics' keys stay those of docs/reference/metrics.md.
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "zero/engine.h"

namespace zerodp::zero {

// The bytes of one rank's copy: `shard_elements` = Σ S over the units, `optimizer_states` fp32 states
// an element.
struct StateCopyBytes {
  uint64_t master = 0;  // the fp32 weights
  uint64_t optim = 0;   // the optimizer states
  uint64_t total() const { return master + optim; }
};
StateCopyBytes state_copy_bytes(uint64_t shard_elements, int optimizer_states);

// Allocated once, when a run that saves asynchronously starts, and refreshed at every save: fresh
// buffers at every save would fault in every page of them again (190k faults a rank for GPT-2 124M at
// W = 2, half a second of the step boundary), and a run whose copy does not fit fails before its first
// step rather than at its first save.
class StateCopy {
 public:
  StateCopy() = default;
  // Host buffers of state_copy_bytes(engine.shards().total_shard(), engine.num_optimizer_states()),
  // their pages touched (resident from now on). Not collective.
  static StateCopy allocate(const Engine& engine);
  // Copies the engine's owned ranges (Engine::copy_owned) into the buffers. Not collective.
  void refresh(const Engine& engine);

  // The copy's ranges, as Engine::visit_owned gives them (empty ranges left out), pointing into the
  // copy: valid while it lives and is not released.
  const std::vector<Engine::OwnedRange>& ranges() const { return ranges_; }
  bool empty() const { return weights_.empty(); }
  // Frees the buffers (and their bytes in the ledger).
  void release();

 private:
  Buffer weights_;              // master
  std::vector<Buffer> states_;  // optim, one per state
  std::vector<Engine::OwnedRange> ranges_;
};

}  // namespace zerodp::zero
