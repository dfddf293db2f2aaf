// The MPI backend's options (comm/mpi_communicator.h): how its worker drives the collectives, and
// the limits of one MPI call. Defaults, overridden by ZERODP_COMM_* environment variables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zerodp::comm {

// kBlocking: one blocking MPI collective at a time; kPoll: up to max_in_flight MPI_I* collectives,
// tested in turn (comm/mpi_communicator.h says when each pays off).
enum class ProgressMode : uint8_t { kPoll, kBlocking };
const char* progress_mode_name(ProgressMode m);
// "poll" or "block"; UsageError otherwise.
ProgressMode parse_progress_mode(std::string_view name);

struct MpiOptions {
  ProgressMode progress = ProgressMode::kBlocking;
  int max_in_flight = 16;       // kPoll: collectives started and not yet completed, at most
  int max_poll_sleep_us = 50;   // kPoll: the longest sleep between two rounds of tests
  double error_grace_s = 10.0;  // an error nobody waits on ends the job after this long
  int worker_nice = 0;          // the worker thread's nice value (0: inherited; < 0 needs CAP_SYS_NICE)
  // Elements (bytes for byte payloads) one MPI call moves at most: MPI-3 counts are int, so larger
  // broadcasts and all-gathers, and the gather phase of larger all-reduces, go in pieces (a lower
  // value only serves tests).
  size_t max_count = 2147483647;
  // learn_hosts takes groups of this many consecutive world ranks for hosts instead of asking MPI
  // which ranks share memory (0): tests of the two-level collectives on one machine.
  int ranks_per_host_for_testing = 0;

  // Defaults overridden by ZERODP_COMM_PROGRESS, ZERODP_COMM_MAX_IN_FLIGHT,
  // ZERODP_COMM_POLL_SLEEP_US, ZERODP_COMM_ERROR_GRACE_S, ZERODP_COMM_NICE, ZERODP_COMM_MAX_COUNT and
  // ZERODP_TEST_RANKS_PER_HOST.
  static MpiOptions from_env();
};

}  // namespace zerodp::comm
