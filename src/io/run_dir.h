// The per-run directory under --nvme-path that a run's offload files are created in:
//
//   <nvme_path>/zerodp-offload.<host>.<pid>.<start>.<run>
//
// named after the process of rank 0 (host name, pid, and its start time in clock ticks since boot,
// which tells a live process from a later one that reuses the pid) and the number of the run within
// it (engines made one after another in one process: a rank still leaving the last one's directory
// must not remove it from under the next): two runs never share one, and every rank of a run uses the
// same (the name is broadcast). Inside, each rank creates its own files
// (rank<r>-<what>), unlinked as soon as they are open (direct_file.h), so the directory is empty
// while the run trains, and the first rank to finish removes it (the others' files have no names
// in it; the engine waits for every rank to have made its files before any can finish).
//
// A run that is killed leaves the empty directory. The next run on the same host removes the ones it
// can prove are stale: named after this host, for a process that no longer exists (no such pid, or
// a pid started at another time). Directories of other hosts (a shared file system) and of live
// processes are left alone.
#pragma once

#include <cstdint>
#include <string>

namespace zerodp::io {

struct ProcessIdentity {
  std::string host;
  int64_t pid = 0;
  uint64_t start_ticks = 0;
};

ProcessIdentity this_process();
// Whether the process is alive: same pid, same start time, not a zombie (false when /proc says otherwise).
bool process_alive(int64_t pid, uint64_t start_ticks);

// 0, 1, 2, ...: the number of each run (engine) this process names a directory for.
uint64_t next_run_number();

// "zerodp-offload.<host>.<pid>.<start>.<run>" (the host's name with any character but [A-Za-z0-9-] as
// '-').
std::string run_dir_name(const ProcessIdentity& owner, uint64_t run);

// Removes the stale run directories of this host under nvme_path (their files first: only names a
// run creates); returns how many. Errors are ignored (a directory another run removes at the same
// time, a permission): cleaning up is a courtesy, not a condition to train.
int remove_stale_run_dirs(const std::string& nvme_path);

// Creates (or joins, for ranks after the first) nvme_path/name, checking nvme_path is a writable
// directory; the destructor removes the directory (empty: its files are unlinked when opened).
class RunDir {
 public:
  RunDir(const std::string& nvme_path, const std::string& name);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace zerodp::io
