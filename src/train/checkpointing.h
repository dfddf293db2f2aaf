// Checkpoints of a training run (docs/checkpoints.md): the glue between the ZeRO engine, the
// communicator and the on-disk format of ckpt/checkpoint.h.
//
// Saving is collective: rank 0 prepares the partial directory, every rank writes its owned range of
// every unit (fp32 weights and optimizer states), the files' sizes and checksums are gathered to
// rank 0, which writes the manifest and commits; a barrier ends it. Resuming opens the checkpoint on
// every rank (the checksums split between the ranks, any problem the same exit-2 error everywhere),
// checks that it can continue this run, and loads each rank's part: whatever world size and stage
// wrote it, a rank just reads the ranges it keeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "comm/communicator.h"
#include "model/gpt2_config.h"
#include "train/train_config.h"
#include "zero/engine.h"

namespace zerodp::train {

// What a checkpoint records about the run besides the engine's state.
struct SaveContext {
  std::string save_dir;
  int keep = 0;                // newest checkpoints kept; <= 0: all
  ckpt::DataPosition data;     // next_token is set by each save from its step
  nlohmann::json training = nlohmann::json::object();  // TrainConfig::to_json()
};
// The context for `cfg` on W ranks.
SaveContext save_context(const TrainConfig& cfg, int world_size);

// Collective: writes SAVE_DIR/step-<step> of the engine's state, where `step` optimizer steps have
// been run. Returns the checkpoint's directory (on every rank). The save's own collectives are not
// counted as training traffic. Testing aid: ZERODP_TEST_CRASH_IN_SAVE=<rank>[:<step>] kills that
// rank half-way through writing its file (at the first save, or at step <step>'s). `remove_later`:
// as ckpt::commit_checkpoint's, on rank 0 (the checkpoints --keep retires, set aside for the caller).
std::string save_checkpoint(zero::Engine& engine, int64_t step, const SaveContext& ctx,
                            std::vector<std::string>* remove_later = nullptr);

// save_checkpoint in its three parts, so that the file can be written from a copy of the state while
// training goes on (async_save.h): begin_save and commit_save are collective and run on the main
// thread at step boundaries; write_own_file calls no collective and may run on any thread.
struct SaveInProgress {
  int64_t step = 0;
  bool writes = false;       // this rank writes a file (it is in the first shard group)
  bool kill_midway = false;  // ZERODP_TEST_CRASH_IN_SAVE names this rank and save
  std::vector<std::string> states;
  std::vector<ckpt::UnitRange> ranges;  // the rank's owned ranges, what its file holds
  ckpt::Manifest manifest;  // rank 0: all of it as of begin_save but the files' sizes and checksums
  std::chrono::steady_clock::time_point started;
};
// Whether this rank writes a file of the engine's checkpoints: one file per shard, written by the first
// shard group (ranks 0..N-1; with hybrid sharding the other groups hold the same shards).
bool writes_checkpoint_file(zero::Engine& engine);
// Collective: rank 0 creates the partial directory, and what the manifest records of the engine (its
// optimizer steps, the loss scaler) is taken now.
SaveInProgress begin_save(zero::Engine& engine, int64_t step, const SaveContext& ctx);
// Writes this rank's file (when it writes one) from the owned ranges `visit` gives, as
// Engine::visit_owned gives them, read chunk by chunk through `chunks` where it is set; returns what
// the manifest lists for it.
using OwnedVisitor = std::function<void(const std::function<void(const zero::Engine::OwnedRange&)>&)>;
ckpt::RankFile write_own_file(const SaveInProgress& save, const SaveContext& ctx, int rank, int world_size,
                              const OwnedVisitor& visit, ckpt::ChunkSource chunks = {});
// Collective, once every rank's write_own_file has returned: the files' sizes and checksums to rank 0,
// which writes the manifest and commits (docs/checkpoints.md); a barrier ends it. Returns the
// checkpoint's directory. `remove_later` as save_checkpoint's.
std::string commit_save(comm::Communicator& comm, SaveInProgress& save, const ckpt::RankFile& mine,
                        const SaveContext& ctx, std::vector<std::string>* remove_later = nullptr);

// Collective: the message of the lowest rank whose `error` is not empty, on every rank; nullopt when
// every rank's is empty. Not counted as training traffic.
std::optional<std::string> first_error(comm::Communicator& comm, const std::string& error);

// Collective: resolves and validates `path` (a checkpoint or a save directory) on every rank. A problem
// found anywhere is thrown on every rank as the same UsageError (exit 2) naming the file.
// Without `shard` every rank opens every rank file and checksums its share of them. With it (the
// resuming run's ZeRO stage >= 1, shard group size N and the rank's place in it) each rank opens and
// checksums only the files that hold part of its own shard, which is all it reads (Engine::load_state).
struct ShardToRead {
  int stage = 0;
  int group_size = 1;  // N
  int shard_rank = 0;  // rank mod N
};
ckpt::Checkpoint open_checkpoint(comm::Communicator& comm, const std::string& path,
                                 const std::optional<ShardToRead>& shard = std::nullopt);

// Whether the checkpoint can continue this run: the same model (and --init's, when given), the same
// optimizer and states, the same sequence length and global batch W·G·B (docs/reference/data-order.md#ranks's data order),
// --steps not below its step. UsageError naming the manifest otherwise. Changed settings that do
// not prevent resuming (learning rate, schedule, clipping, dtype, token file...) are returned as
// warnings, one line each.
std::vector<std::string> check_resume(const ckpt::Checkpoint& ckpt, const TrainConfig& cfg, int world_size,
                                      const model::ModelConfig* init_model);

// The data order continues from the checkpoint: --shuffle and --seed default to the ones it was
// trained with (a checkpoint from before --shuffle existed was in order). Given flags that would
// change the order are a UsageError naming the manifest.
void inherit_data_order(const ckpt::Checkpoint& ckpt, TrainConfig& cfg);

// Loads what this rank keeps (weights, masters, optimizer states), the optimizer's step count and,
// for fp16 runs that saved one, the loss scaler. Returns the step to continue from. A weight or
// state that is not finite (or a negative second moment) is a UsageError naming the file's tensor:
// nothing non-finite is trained on.
int64_t restore_checkpoint(zero::Engine& engine, const ckpt::Checkpoint& ckpt);

}  // namespace zerodp::train
