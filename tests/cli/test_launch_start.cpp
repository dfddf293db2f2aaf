// zerodp launch's tries that cannot start (apps/launch_start.h): the backoff between them, the
// launcher messages that mark them and the hosts they name, and the relay of the launcher's output.
#include "apps/launch_start.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace zerodp::cli {
namespace {

// The waits of an outage that never ends, tried at once after each wait: 1, 2, 4, 8, 16, 30, 30, ...
// s, the last one cut to end at the deadline, then none.
std::vector<double> schedule(double join_timeout_s) {
  std::vector<double> waits;
  double waited = 0;
  for (int tries = 1; tries < 1000; ++tries) {
    const std::optional<double> wait = start_backoff_s(tries, waited, join_timeout_s);
    if (!wait) break;
    waits.push_back(*wait);
    waited += *wait;
  }
  return waits;
}

TEST(LaunchStart, BackoffDoublesFromOneSecondToThirty) {
  EXPECT_EQ(schedule(120), (std::vector<double>{1, 2, 4, 8, 16, 30, 30, 29}));
  EXPECT_EQ(schedule(600).size(), 5u + 18u + 1u);  // 31 s in five waits, then 569 s: 18 x 30 s and 29 s
  EXPECT_EQ(schedule(600).back(), 29);
}

TEST(LaunchStart, BackoffEndsAtTheDeadline) {
  EXPECT_EQ(schedule(0), std::vector<double>{});  // --join-timeout 0: count the try at once
  EXPECT_EQ(schedule(2.5), (std::vector<double>{1, 1.5}));
  EXPECT_EQ(start_backoff_s(3, 10, 10), std::nullopt);
  EXPECT_EQ(start_backoff_s(3, 11, 10), std::nullopt);
  EXPECT_EQ(start_backoff_s(0, 0, 10), std::nullopt);  // no try has failed: nothing to wait for
  // However many tries an outage takes, the wait stays at 30 s (no overflow of the doubling).
  EXPECT_EQ(start_backoff_s(100000, 0, 1e9), 30);
}

// Open MPI 4.1's output when host h1's daemon cannot reach mpirun on h0 (the test hosts' cut link):
// the TCP block on stdout, the start failure on stderr, both wrapped over lines.
const char* const kOrteCut =
    "------------------------------------------------------------\n"
    "A process or daemon was unable to complete a TCP connection\n"
    "to another process:\n"
    "  Local host:    h1\n"
    "  Remote host:   h0\n"
    "This is usually caused by a firewall on the remote host.\n"
    "------------------------------------------------------------\n"
    "\n"
    "--------------------------------------------------------------------------\n"
    "ORTE was unable to reliably start one or more daemons.\n"
    "This usually is caused by:\n";

TEST(LaunchStart, ReadsOpenMpisStartFailureAndTheHost) {
  const StartFailure f = read_start_failure(kOrteCut);
  EXPECT_TRUE(f.could_not_start);
  EXPECT_EQ(f.said, "ORTE was unable to reliably start one or more daemons");
  EXPECT_EQ(f.hosts, std::vector<std::string>{"h1"});
}

TEST(LaunchStart, ReadsADaemonLostBeforeItCalledBackAndSshsHosts) {
  const StartFailure f = read_start_failure(
      "ssh: connect to host node7 port 22: Connection timed out\r\n"
      "ssh: Could not resolve hostname node9: Name or service not known\n"
      "ssh: connect to host node7 port 22: Connection timed out\n"
      "An ORTE daemon has unexpectedly failed after launch and before\n"
      "communicating back to mpirun. This could be caused by a number\n");
  EXPECT_TRUE(f.could_not_start);
  EXPECT_EQ(f.hosts, (std::vector<std::string>{"node7", "node9"}));
}

TEST(LaunchStart, ReadsSlurmsNodeNotAvailable) {
  const StartFailure f =
      read_start_failure("srun: error: Unable to create step for job 17: Required node not available (down, "
                         "drained or reserved)\n");
  EXPECT_TRUE(f.could_not_start);
  EXPECT_TRUE(f.hosts.empty());
}

TEST(LaunchStart, ReadsALauncherThatRefusedItsArguments) {
  const StartFailure f = read_start_failure(
      "--------\nmpirun: Error: unknown option \"--join-timeut\"\nType 'mpirun --help' for usage.\n");
  EXPECT_TRUE(f.launcher_refused_arguments);
  EXPECT_FALSE(f.could_not_start);
  EXPECT_EQ(f.said, "mpirun: Error: unknown option \"--join-timeut\"");
  EXPECT_TRUE(read_start_failure("srun: unrecognized option '--ntask=2'\n").launcher_refused_arguments);
  EXPECT_FALSE(read_start_failure("[rank 0] error: --steps: not a number\n").launcher_refused_arguments);
}

TEST(LaunchStart, AJobThatRanIsNoStartFailure) {
  // A rank's own failure, or Open MPI's message after a job that ran lost a daemon: the job got going.
  EXPECT_FALSE(read_start_failure("[rank 1] error: collective all_reduce did not complete within 5 s\n"
                                  "ORTE has lost communication with a remote daemon.\n")
                   .could_not_start);
  EXPECT_FALSE(read_start_failure("").could_not_start);
  // A host named without a start failure is reported, but the try is not one that could not start.
  const StartFailure f = read_start_failure("ssh: connect to host n1 port 22: No route to host\n");
  EXPECT_FALSE(f.could_not_start);
  EXPECT_EQ(f.hosts, std::vector<std::string>{"n1"});
}

// Runs `sh -c script` with its output through a relay (passed on to /dev/null); returns the relay's tail.
std::string relayed(const std::string& script) {
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  EXPECT_GE(null_fd, 0);
  OutputRelay relay(null_fd, null_fd);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  relay.redirect(&actions);
  const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  relay.spawned();
  EXPECT_EQ(rc, 0);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) relay.pump(20);
  relay.finish();
  close(null_fd);
  return relay.tail();
}

TEST(LaunchStart, RelayKeepsBothStreamsEnds) {
  EXPECT_EQ(relayed("printf out; printf err >&2"), "out\nerr");
  // More than the tail keeps: the end of each stream is kept, whole.
  const std::string tail = relayed("head -c 300000 /dev/zero | tr '\\0' a; printf END; printf E2 >&2");
  EXPECT_EQ(tail.size(), OutputRelay::kTailBytes + 3);
  EXPECT_EQ(tail.substr(tail.size() - 7), "aEND\nE2");
}

TEST(LaunchStart, RelayDoesNotWaitForAChildsChild) {
  // The launcher ends but a process it left holds the pipes (a daemon on a host it cannot reach):
  // finish() returns with what came, without waiting for the pipes to end.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(relayed("printf before; (sleep 5; printf late) & exit 0"), "before\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

}  // namespace
}  // namespace zerodp::cli
