// A run's checkpoints as --save-dir, --save-every and --async-save ask for them (docs/checkpoints.md,
// "Asynchronous saves"): written at once (a synchronous save, the default), or written by a background
// thread while training goes on, from a copy in host memory taken at the step boundary or, where the
// engine's state is host memory as the file holds it (the CPU device), from the state itself: the
// next step's forward and backward do not change it, and the engine calls freeze() before its update
// does, which copies whatever the writer has not read yet.
//
// An asynchronous save keeps the atomicity of a synchronous one: the same partial directory, rank files,
// manifest and renames, committed by rank 0 once every rank's file is written. The background thread
// only writes this rank's file; everything collective stays on the main thread. At each step boundary
// while a save is in flight, poll() asks every rank whether its writer is done (one float all-reduce,
// not training traffic) and, once all are, commits the save: the files' sizes and checksums to rank 0,
// which writes the manifest and renames. The host copy is allocated when the saver is made and lives
// as long as it (zero/state_copy.h), so that the host tier's peak depends on the run's settings alone,
// never on how fast a disk is. At most one save is in flight: the next save, and the end of the run,
// wait for it.
//
// Either way, the checkpoints --keep retires are set aside at the commit (renamed out of sight) and
// removed by another background thread, so that no step waits for the file system to free them; the
// next save, and the end of the run, wait for that too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "train/checkpointing.h"
#include "zero/engine.h"
#include "zero/state_copy.h"

namespace zerodp::train {

class CheckpointSaver {
 public:
  // The engine outlives the saver. Asynchronous: allocates the host copy now (a RuntimeFailure when it
  // does not fit), before any step.
  CheckpointSaver(zero::Engine& engine, SaveContext ctx, bool async);
  // A save still in flight (the run failed): waits for its writer and commits nothing, leaving the
  // partial directory as a crash would (the next save removes it).
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Collective, at every step boundary: with a save in flight, asks every rank whether its writer is
  // done and commits the save once all are. Nothing without one.
  void poll();
  // Collective: saves the checkpoint of `step` optimizer steps. A save in flight is committed first.
  // Synchronous: returns once it is committed. Asynchronous: returns once the state is copied and the
  // writer started. A rank's writer that failed is a RuntimeFailure on every rank, at the commit.
  void save(int64_t step);
  // Collective: waits for the save in flight, if any, and commits it; then for the removal of the
  // checkpoints it retired.
  void finish();

 private:
  void commit();
  // The engine's hook before its state changes: a writer still reading it in place gets the rest
  // copied first.
  void freeze();
  void start_removal(std::vector<std::string> dirs);
  void join_removal();

  struct InFlight;
  zero::Engine& engine_;
  const SaveContext ctx_;
  const bool async_;
  zero::StateCopy copy_;  // async saves: the state at the last save's step boundary
  std::unique_ptr<InFlight> in_flight_;
  std::thread removal_;  // rank 0: removes what the last commit retired
};

}  // namespace zerodp::train
