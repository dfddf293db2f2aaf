// The host copy of a rank's checkpoint state that an asynchronous save (train/async_save.h) takes at a
// step boundary, so that training goes on while a background thread writes the copy to its file (or,
// where the writer reads the state in place, holds what it has not read when the update comes), and
// the rule for its bytes, which the planner (plan/estimator.h, --async-save) calls too.
//
// The copy holds, for every unit, the rank's owned range of the fp32 weights (the masters of 16-bit
// runs) and of each optimizer state. It is laid out for the writer: the weights in one array, the
// states in another, each unit's piece placed where its bytes line up with the rank file's blocks
// (an address equal to the piece's file offset modulo kFileBlock), so that the file is written with
// O_DIRECT straight from the copy, with no staging copy (core/fs.h, AtomicFile). Each array reserves
// a slot of the unit's shard size S (and one block for the alignment) for every unit, so that every
// rank of a shard group holds the same bytes, whichever owns the unit's padding. In the ledger's host
// tier (a GPU's page-locked memory), the weights under `master` and the states under `optim`: the
// same categories as the engine's own copies, so the metrics' keys stay those of
// docs/reference/metrics.md.
#pragma once

#include <cstdint>
#include <vector>

#include "core/fs.h"
#include "core/memory.h"
#include "zero/engine.h"

namespace zerodp::zero {

// The alignment the copy's pieces keep to their file offsets: O_DIRECT's block.
constexpr uint64_t kFileBlock = kDirectBlock;

// The bytes of one rank's copy: `shard_elements` = Σ S over the `units` units, `optimizer_states`
// fp32 states an element; each array also has one kFileBlock a unit for the alignment.
struct StateCopyBytes {
  uint64_t master = 0;  // the fp32 weights
  uint64_t optim = 0;   // the optimizer states
  uint64_t total() const { return master + optim; }
};
StateCopyBytes state_copy_bytes(uint64_t shard_elements, uint64_t units, int optimizer_states);

// Allocated once, when a run that saves asynchronously starts, and refreshed at every save: fresh
// buffers at every save would fault in every page of them again (190k faults a rank for GPT-2 124M at
// W = 2, half a second of the step boundary), and a run whose copy does not fit fails before its first
// step rather than at its first save.
class StateCopy {
 public:
  StateCopy() = default;
  // Host buffers of state_copy_bytes(engine.shards().total_shard(), its units,
  // engine.num_optimizer_states()), their pages touched (resident from now on). Not collective.
  static StateCopy allocate(const Engine& engine);
  // Lays the copy out for a file whose data (the ranges in unit order, each range's weights then its
  // states) starts at byte `data_offset`, without filling it: ranges() then point into the copy. Not
  // collective.
  void lay_out(const Engine& engine, uint64_t data_offset);
  // lay_out, then copies the engine's owned ranges (Engine::copy_owned) into the buffers.
  void refresh(const Engine& engine, uint64_t data_offset);
  // Copies range i of ranges() from host memory: `from` is the same range (owned_in_place()'s i-th).
  void fill(size_t i, const Engine::OwnedRange& from);

  // The copy's ranges, as Engine::visit_owned gives them (empty ranges left out), pointing into the
  // copy: valid while it lives and is not released, until the next refresh.
  const std::vector<Engine::OwnedRange>& ranges() const { return ranges_; }
  bool empty() const { return weights_.empty(); }
  // Frees the buffers (and their bytes in the ledger).
  void release();

 private:
  Buffer weights_;  // master
  Buffer states_;   // optim, every state of a unit's range one after the other
  std::vector<Engine::OwnedRange> ranges_;
  std::vector<Engine::OwnedCopy> into_;  // the same pointers, to write through
};

}  // namespace zerodp::zero
