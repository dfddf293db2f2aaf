// The MPI backend of Communicator. Each communicator owns an MPI communicator and one worker thread
// that runs its collectives in issue order, so the caller never enters MPI and computes while they
// progress (OpenMPI does not progress non-blocking collectives on its own). Issue order is the same
// on every rank, so running them in that order cannot deadlock.
//
// Two ways to drive them (MpiOptions::progress, or ZERODP_COMM_PROGRESS=block|poll):
//  - kBlocking (default): the worker runs one blocking MPI collective at a time, the way PyTorch's
//    ProcessGroupMPI does: the library's tuned algorithms, the lowest latency measured here.
//    OpenMPI busy-polls inside them; world() asks it to yield the core while it does
//    (mpi_yield_when_idle), since the worker shares the cores with the computing threads.
//  - kPoll: the worker starts up to max_in_flight collectives as MPI_I* calls and tests them,
//    yielding and then sleeping (backing off to max_poll_sleep_us) while none completes: several
//    collectives really progress at once, and a waiting worker sleeps instead of spinning.
// docs/benchmarks/communication.md has the measurements behind the default (`zerodp bench comm`).
//
// Reductions are deterministic: sums and averages (all-reduce, reduce-scatter) are not MPI's
// reductions but the backend's own ordered ones (comm/mpi_ordered_reduction.h), so the bits of a
// result depend only on the values and W, never on the collective, the message size or how a
// caller buckets its buffers: ZeRO stage 0's bucketed all-reduce and stage 2's per-unit
// reduce-scatter agree to the last bit. Such a reduction runs alone on the worker (nothing else in
// flight), in both progress modes. kMax uses MPI_MAX (fp32) or a user-defined operator (16 bits
// travel as MPI_UINT16_T): a maximum does not depend on the order.
//
// Files: this class (the transport hooks, splits, the registry of live communicators);
// mpi_worker.h (the thread, its queue, Work handles and failure path); mpi_ordered_reduction.h;
// mpi_transfer.h (datatypes, requests, collectives in pieces); mpi_options.h (the options).
//
// Errors: MPI returns its errors (MPI_ERRORS_RETURN); the worker turns them into RuntimeFailure
// naming the collective, count, dtype and group, and wait() rethrows it. After an error the
// communicator is unusable (the ranks no longer agree on the order of collectives): every later
// collective fails at once with the first error. An error that no wait() observes within
// error_grace_s ends the whole job (abort_job) so that no rank hangs on it.
//
// Memory: an ordered reduction stages one piece of every peer's values and an fp32 accumulator in a
// buffer of the ledger's category comm (ordered_reduction_staging_bytes_for, about 1 MiB at most).
// The communicator keeps one such buffer for all its reductions (the worker runs them one at a
// time), allocated on the issuing thread when a reduction needs more than it has and freed when the
// last reduction issued is waited for, so that the ledger sees the same sequence of allocations in
// every run, whatever the timing. MPI's own temporary buffers are not counted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "comm/communicator.h"
#include "comm/mpi_c.h"
#include "comm/mpi_options.h"
#include "comm/mpi_ordered_reduction.h"
#include "comm/mpi_transfer.h"

namespace zerodp::comm {

class MpiWorker;

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` (freed on destruction) and sets its error handler to return errors.
  MpiCommunicator(MPI_Comm comm, const MpiOptions& options);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

  // MPI_Comm_split, run by the worker in issue order. A negative color joins no group: nullptr.
  std::unique_ptr<Communicator> split(int color, int key) override;
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), run by the worker in issue order.
  std::unique_ptr<Communicator> split_by_host() override;
  std::unique_ptr<MpiCommunicator> split_mpi(int color, int key, const MpiOptions& options);

  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) tells the hosts apart (or the testing option); with
  // two_level and a regular layout over several hosts, the worker gets the two communicators of
  // comm/mpi_two_level.h. Splits made afterwards learn their own layout the same way.
  const HostLayout& learn_hosts(bool two_level) override;

  const MpiOptions& options() const { return options_; }
  // The watchdog (comm/watchdog.h): applies to collectives issued from now on, and to later splits.
  void set_timeout(double seconds) override;
  // The job-wide id (comm/watchdog.h) and the collectives issued on this communicator so far.
  uint64_t id() const;
  uint64_t collectives_issued() const;
  // The MPI communicator (MPI_COMM_NULL once shut down with free_comm).
  MPI_Comm handle() const;

  // For tests: the next collective issued hands MPI an invalid datatype, so that MPI itself
  // reports an error through the worker (all ranks must do the same, since no data moves).
  void inject_mpi_error_for_testing();

  // Completes what is queued, stops the worker and, if free_comm, frees the MPI communicator.
  // Idempotent; the destructor calls it. Collectives issued afterwards throw.
  void shutdown(bool free_comm);

 protected:
  WorkPtr start(const Collective& c) override;
  WorkPtr start_barrier() override;

 private:
  // Runs `split` (an MPI_Comm_split*) on the worker and wraps what it makes; `color` seeds the child's id.
  std::unique_ptr<MpiCommunicator> split_with(const std::function<int(MPI_Comm, MPI_Comm*)>& split, int color,
                                              const std::string& what, const MpiOptions& options);

  MpiOptions options_;
  int rank_ = 0;
  int size_ = 1;
  uint64_t splits_ = 0;  // splits made so far (each derives its id from the count)
  bool learned_hosts_ = false, asked_two_level_ = false;
  std::unique_ptr<MpiWorker> worker_;
};

// The collectives this process issued on the live communicator with job-wide id `comm_id`; nullopt
// when it has none (comm/watchdog.h's status service).
std::optional<uint64_t> collectives_issued_on(uint64_t comm_id);

// Stops the worker of every live MpiCommunicator (without freeing the MPI communicators): the step
// before MPI_Finalize.
void shutdown_all_mpi_communicators();

// True on the worker thread of some MpiCommunicator.
bool on_comm_worker_thread();

}  // namespace zerodp::comm
