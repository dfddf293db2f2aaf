// The collective watchdog (--comm-timeout). A wait on a collective that has not completed after its
// communicator's timeout (Communicator::set_timeout) ends that wait with a RuntimeFailure (exit 1)
// naming the collective, what this process was doing (the step) and which ranks had not arrived,
// instead of hanging forever.
//
// Which ranks had not arrived is learned over a side channel that does not depend on the stuck
// collective: every process runs a status service, a thread of its own on a duplicate of
// MPI_COMM_WORLD used for nothing else, which answers "how many collectives have you issued on
// communicator C, and what are you doing?". A member of the stuck collective's communicator that
// issued fewer collectives there had not arrived; one that does not answer within a few seconds is
// stopped (SIGSTOP), hung outside MPI, or cut off. Communicators are told apart by a job-wide id
// (the world is 1; a split's id derives from its parent's, the split's number and its color), the
// same on every member.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerodp::comm {

// What this process is doing, in a few words ("step 17"), set by whoever drives the collectives.
void set_activity_context(const std::string& what);
std::string activity_context();

// The collective this process is blocked on, for the status service's answers: its description, its
// communicator's job-wide id and its 0-based number there; clear_waiting() when the wait is over.
void set_waiting_on(const std::string& what, uint64_t comm_id, uint64_t seq);
void clear_waiting();

// Starts the status service: collective over MPI_COMM_WORLD, once (comm::world() calls it). Stopped
// by stop_status_service() before MPI_Finalize.
void start_status_service();
void stop_status_service();

// A collective a wait gave up on.
struct StuckCollective {
  std::string what;              // "all_reduce(count=2, dtype=fp32)"
  uint64_t comm_id = 0;          // its communicator's id
  uint64_t seq = 0;              // 0-based: the seq-th collective issued on that communicator
  std::vector<int> world_ranks;  // the communicator's members, by their world rank
  int my_world_rank = 0;
  double waited_s = 0;
};

// Asks every other member where it is (a few seconds at most) and returns the message: the
// collective, this process's context, the ranks that had not arrived (and what they do, or that
// they did not answer) and those that had. Bounded in length whatever the world size.
std::string diagnose_stuck_collective(const StuckCollective& c);

}  // namespace zerodp::comm
