// zerodp launch's attempts that cannot start (apps/cmd_launch.cpp). A host that does not answer
// (a cut link, a host rebooting) makes mpirun fail within a second, before any rank runs; such a
// try is no failure of the job, and spending a restart on it lets a short outage use up every
// restart while the link is still down. Here: telling those tries from failures of a running job
// by what the launcher says (read_start_failure), the wait between tries (start_backoff_s), and the
// relay that passes the launcher's output on while keeping its end to read (OutputRelay).
//
// Only std, POSIX and core/error.h: tests/cli/test_launch_start.cpp runs these on their own.
#pragma once

#include <spawn.h>

#include <optional>
#include <string>
#include <vector>

namespace zerodp::cli {

// What a failed attempt's launcher output says about its start.
struct StartFailure {
  bool could_not_start = false;    // the launcher says it could not start its daemons (no rank ran)
  std::string said;                // the launcher's words that say so (one of kStartFailureMarkers)
  std::vector<std::string> hosts;  // the hosts the output names as unreachable, each once, in order
  // The launcher refused its own arguments (a misspelled launcher flag): every attempt would fail
  // alike, so none is retried. `said` then holds the launcher's words.
  bool launcher_refused_arguments = false;
};

// Reads the launcher's output (stdout and stderr, the end of each) for one of the messages a
// launcher prints when it cannot start the job's daemons on a host: Open MPI's ORTE "was unable to
// reliably start one or more daemons" and "An ORTE daemon has unexpectedly failed after launch and
// before communicating back to mpirun"; Slurm's "Required node not available". Also whether the
// launcher refused its arguments: Open MPI's "mpirun: Error: unknown option", srun's "unrecognized
// option" and "invalid option". Line breaks and runs
// of spaces count as one space (Open MPI wraps its help texts). The hosts come from the lines that
// name one: Open MPI's "unable to complete a TCP connection ... Local host: H", ssh's "connect to
// host H port" and "Could not resolve hostname H".
StartFailure read_start_failure(const std::string& output);

// The wait before the next try to start, after `failed_tries` (>= 1) tries in a row could not start
// and `waited_s` seconds since the first of them ended: 1 s, doubling up to 30 s, never past
// `join_timeout_s` after the first; nullopt once that is reached (the try then counts as a failed
// attempt). No jitter: a single launcher retries, there is no crowd to spread out.
std::optional<double> start_backoff_s(int failed_tries, double waited_s, double join_timeout_s);

// The launcher's stdout and stderr, through pipes: passed on to zerodp launch's own as they come,
// and the last kTailBytes of each kept for read_start_failure. Not copyable.
class OutputRelay {
 public:
  static constexpr size_t kTailBytes = 64 * 1024;

  // Makes the pipes, to be passed on to out_fd and err_fd; throws RuntimeFailure naming what failed.
  explicit OutputRelay(int out_fd = 1, int err_fd = 2);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // For posix_spawn: the child's stdout and stderr become the pipes' write ends.
  void redirect(posix_spawn_file_actions_t* actions) const;
  // After the spawn: closes this process's write ends, so the pipes end with the launcher's.
  void spawned();
  // Waits up to timeout_ms for output and passes on what came.
  void pump(int timeout_ms);
  // Passes on what is readable now and closes the pipes. Does not wait for the pipes to end: a
  // daemon the launcher left behind (on a host it cannot reach) may hold them for minutes.
  void finish();
  // The end of stdout, a line break, the end of stderr.
  std::string tail() const;

 private:
  void close_all();

  int read_end_[2] = {-1, -1};   // [0]: stdout, [1]: stderr
  int write_end_[2] = {-1, -1};
  int pass_to_[2];               // where each stream goes on to
  std::string tail_[2];
};

}  // namespace zerodp::cli
