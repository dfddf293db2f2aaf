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
// docs/benchmarks.md has the measurements behind the default (`zerodp bench comm`).
//
// Reductions are deterministic: sums and averages (all-reduce, reduce-scatter) are not MPI's
// reductions but the backend's own ordered ones: every element's result is the ranks' values,
// widened to fp32, added in rank order (x_0 + x_1 + ... + x_{W-1}) and rounded once to the dtype
// (divided by W first for kAvg). So the bits of a result depend only on the values and W, never
// on the collective, the message size or how a caller buckets its buffers: ZeRO stage 0's bucketed
// all-reduce and stage 2's per-unit reduce-scatter agree to the last bit. The owner of each chunk
// receives everyone's values of it by point-to-point messages in pieces (each rank sends (W−1)/W
// of the buffer, as a ring reduce-scatter does) and adds them; an all-reduce then all-gathers the
// chunks. Such a reduction runs alone on the worker (nothing else in flight), in both progress
// modes. kMax uses MPI_MAX (fp32) or a user-defined operator (16 bits travel as MPI_UINT16_T):
// a maximum does not depend on the order.
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

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "comm/mpi_c.h"

#include "comm/communicator.h"

namespace zerodp::comm {

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

  // Defaults overridden by ZERODP_COMM_PROGRESS, ZERODP_COMM_MAX_IN_FLIGHT,
  // ZERODP_COMM_POLL_SLEEP_US, ZERODP_COMM_ERROR_GRACE_S, ZERODP_COMM_NICE and ZERODP_COMM_MAX_COUNT.
  static MpiOptions from_env();
};

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
  WorkPtr broadcast_bytes_async(void* buf, size_t bytes, int root) override;
  WorkPtr all_gather_bytes_async(const void* send, void* recv, size_t bytes) override;
  // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), run by the worker in issue order.
  std::unique_ptr<Communicator> split_by_host() override;
  std::unique_ptr<MpiCommunicator> split_mpi(int color, int key, const MpiOptions& options);

  WorkPtr barrier_async() override;
  WorkPtr broadcast_async(void* buf, size_t count, DType dtype, int root) override;
  WorkPtr all_reduce_async(void* buf, size_t count, DType dtype, ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t count, DType dtype,
                               ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t count, DType dtype) override;

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

  class Impl;

 private:
  WorkPtr all_gather_op(const void* send, void* recv, size_t count, DType dtype, bool bytes);

  MpiOptions options_;
  int rank_ = 0;
  int size_ = 1;
  uint64_t splits_ = 0;  // splits made so far (each derives its id from the count)
  std::unique_ptr<Impl> impl_;
};

// The collectives this process issued on the live communicator with job-wide id `comm_id`; nullopt
// when it has none (comm/watchdog.h's status service).
std::optional<uint64_t> collectives_issued_on(uint64_t comm_id);

// The ordered reductions' pieces: elements of one chunk sent to one peer per message.
size_t ordered_reduction_piece_elements(int group_size);
// The staging an ordered reduction allocates (category comm) when the longest chunk it reduces has
// `chunk_elements` elements: one piece of fp32 accumulator and W pieces of the dtype (a small
// all-reduce of n elements, W·n·size ≤ 256 KiB, gathers everyone's whole buffer: chunk = n).
size_t ordered_reduction_staging_bytes(size_t chunk_elements, DType dtype, int group_size);
// The staging one sum or average of `count` elements needs: all_reduce_async (all_reduce) or
// reduce_scatter_async (count per rank) in a group of `group_size`; 0 for one rank or no elements.
size_t ordered_reduction_staging_bytes_for(bool all_reduce, size_t count, DType dtype, int group_size);

// Stops the worker of every live MpiCommunicator (without freeing the MPI communicators): the step
// before MPI_Finalize.
void shutdown_all_mpi_communicators();

// True on the worker thread of some MpiCommunicator.
bool on_comm_worker_thread();

// Turns an MPI return code into a RuntimeFailure "<what>: <MPI error string>"; no-op on MPI_SUCCESS.
void check_mpi(int rc, std::string_view what);

}  // namespace zerodp::comm
