// Sharded checkpoints on disk (docs/checkpoints.md): writing one rank's file, committing a
// checkpoint atomically, and reading any element range of any unit back, whatever world size and
// stage wrote it.
//
//   SAVE_DIR/
//     latest                     "step-6\n": the newest complete checkpoint, replaced atomically
//     step-4/  step-6/           complete checkpoints (only the newest K when asked)
//       manifest.json            manifest.h: what, how it was cut, where training stands, checksums
//       manifest.crc32c          "<8 hex digits>  manifest.json\n": the manifest's own CRC-32C
//       rank-00000.safetensors   rank r's owned range of every unit: F32 arrays unit.<u>.weights,
//       rank-00001.safetensors   unit.<u>.<state> (AdamW exp_avg, exp_avg_sq; SGD momentum_buffer)
//     .partial-step-8/           a save in progress (never read; removed by the next commit)
//
// A save: rank 0 prepares the partial directory; every rank writes its file there (streamed, with
// its CRC-32C computed on the way, fsynced); rank 0 writes the manifest with every file's size and
// checksum, fsyncs, renames the directory to step-<n>, fsyncs SAVE_DIR, replaces `latest`, and
// removes the checkpoints beyond the newest K. A crash at any point leaves the previous checkpoint
// and `latest` as they were; no step-<n> directory is ever incomplete.
//
// Reading validates everything before handing anything out: the manifest's checksum and schema,
// every file's presence, size, checksum, safetensors structure and arrays. Every problem is a
// UsageError (exit 2) naming the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "core/fs.h"
#include "model/layout.h"

namespace zerodp::ckpt {

constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kManifestChecksumFile = "manifest.crc32c";
constexpr const char* kLatestFile = "latest";

// ---- writing ----------------------------------------------------------------------------------

// SAVE_DIR/.partial-step-<n>: where the files of step n's save are written.
std::string partial_dir(const std::string& save_dir, int64_t step);

// Creates SAVE_DIR (and parents) if needed: UsageError naming it when that fails or it is not a
// directory. A run calls it at its start, so that a bad --save-dir stops it before any training.
void make_save_dir(const std::string& save_dir);

// Rank 0, before any rank writes: creates SAVE_DIR (and parents) if needed and an empty partial
// directory for `step` (removing one a crashed save left). UsageError when SAVE_DIR cannot be made.
void prepare_save(const std::string& save_dir, int64_t step);

// One unit range of the rank's: its fp32 weights and optimizer states (end - begin floats each).
struct RankPiece {
  UnitRange range;
  const float* weights = nullptr;
  std::vector<const float*> states;  // one per state name
};

// Where write_rank_file reads each chunk of the pieces' data (up to 1 MiB of one array of one piece):
// acquire(p, n) returns where to read the n floats the piece gives at p, valid until release(). For
// a writer whose source another thread may replace while it writes (train/async_save.cpp). Unset:
// read at p.
struct ChunkSource {
  std::function<const float*(const float* p, size_t n)> acquire;
  std::function<void()> release;
};

struct RankFileOptions {
  // Testing aid: SIGKILL this process after writing about half of the file (a rank killed in the
  // middle of a save).
  bool kill_midway = false;
  ChunkSource chunks;
  // Refuse a NaN or Inf in the weights or states (a resume refuses them): the write stops with an error
  // naming the unit and its array, and leaves no file. Checked in the pass the checksum makes, where it
  // costs next to nothing; a separate scan of a rank's weights at the step boundary took ~30 ms.
  bool finite = false;
  int64_t after_step = -1;  // for the error: the step the state is after
};

// Writes dir/rank_file_name(rank) (atomically: fsynced, renamed, directory fsynced) and returns
// what the manifest lists for it. `pieces` in unit order; `states` names the optimizer states.
RankFile write_rank_file(const std::string& dir, int rank, int world_size, int64_t step,
                         const std::vector<std::string>& states, const std::vector<RankPiece>& pieces,
                         const RankFileOptions& options = {});

// The same with the pieces' data streamed: `ranges` (unit order) is what the file holds, and
// visit(write) must call write(piece) for each of them in that order, the piece's data valid only
// during the call (an engine that brings its states in from NVMe a unit at a time).
using RankPieceVisitor = std::function<void(const std::function<void(const RankPiece&)>& write)>;
RankFile write_rank_file(const std::string& dir, int rank, int world_size, int64_t step,
                         const std::vector<std::string>& states, const std::vector<UnitRange>& ranges,
                         const RankPieceVisitor& visit, const RankFileOptions& options = {});

// The safetensors header (its length and JSON) that write_rank_file writes first: the file's data, the
// ranges in order with each range's weights and then its states, starts at byte size().
std::string rank_file_header(int rank, int world_size, int64_t step, const std::vector<std::string>& states,
                             const std::vector<UnitRange>& ranges);

// Rank 0, once every rank's file is in the partial directory and `m` lists them: writes the
// manifest and its checksum, renames the partial directory to SAVE_DIR/step-<m.step> (replacing a
// checkpoint of that step if there is one), points `latest` at it, and keeps only the newest `keep`
// checkpoints up to this step (keep <= 0: all). Checkpoints numbered above this one, left by an
// earlier run, are neither counted nor removed. Returns the checkpoint's directory.
//
// With `remove_later`, the checkpoints that go (and the leftovers of crashed saves and removals) are
// only renamed out of sight (".deleting-step-<n>", the directory fsynced) and their paths appended to
// it, for the caller to remove with remove_dirs off its critical path: removing a checkpoint of 1.5 GB
// takes a quarter of a second where the file system discards freed blocks at once (ext4 mounted with
// `discard`). Left there by a crash, they go at the next commit.
std::string commit_checkpoint(const std::string& save_dir, const Manifest& m, int keep,
                              std::vector<std::string>* remove_later = nullptr);
// Removes each directory and all it holds. RuntimeFailure naming the first that cannot be removed.
void remove_dirs(const std::vector<std::string>& dirs);

// ---- reading ----------------------------------------------------------------------------------

// The checkpoint directory a path means: itself when it holds manifest.json, else the checkpoint
// its `latest` names. UsageError when it is neither.
std::string resolve_checkpoint(const std::string& path);

class Checkpoint {
 public:
  // Which rank files' checksums open() computes (the others get every other check); null: all.
  using VerifyFilter = std::function<bool(int rank)>;
  // Which rank files open() opens at all, given the manifest (a rank resuming reads only the files that
  // hold its shard); null: all. read() of elements in a file not opened is an error.
  using FileFilter = std::function<bool(const Manifest& manifest, int rank)>;

  // Resolves, opens and validates the checkpoint (see above). Throws UsageError naming the file.
  static Checkpoint open(const std::string& path, const VerifyFilter& verify = nullptr,
                         const FileFilter& files = nullptr);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::string& dir() const;
  const Manifest& manifest() const;
  const model::ParamLayout& layout() const;
  std::string file_path(int rank) const;  // dir/rank-<r>.safetensors

  // dst[k] = element begin + k of unit `unit`'s weights (state -1) or optimizer state `state`
  // (0.., manifest().states order), for k < count: assembled from the rank files that hold it.
  void read(int state, int unit, size_t begin, size_t count, float* dst) const;
  // The CRC-32C of rank r's file as it is now; empty when it matches the manifest, else a message
  // naming the file (for `zerodp ckpt inspect`).
  std::string verify_file(int rank) const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerodp::ckpt
