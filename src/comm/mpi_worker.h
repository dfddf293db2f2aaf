// The MPI backend's worker (comm/mpi_communicator.h): one thread per communicator that runs what is
// issued in issue order, so that the caller never enters MPI. Its Work handles, the ordered
// reductions' staging, and the failure path (the first error poisons the communicator; one that no
// wait() observes within error_grace_s ends the job).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/host_layout.h"
#include "comm/mpi_transfer.h"
#include "comm/mpi_two_level.h"

namespace zerodp::comm {

class MpiWork;
struct ReductionStaging;

// What the worker runs: a collective, a barrier, or a task (a split: MPI calls that must keep the
// issue order). Its buffers belong to the caller, who keeps them alive until the work completes.
struct PendingOp {
  enum class Kind : uint8_t { kCollective, kBarrier, kTask };
  Kind kind = Kind::kCollective;
  Collective collective;
  std::function<void()> task;
  bool inject_error = false;
  std::shared_ptr<MpiWork> work;
  char* staging = nullptr;  // an ordered reduction's share of the communicator's staging buffer
  MPI_Request request = MPI_REQUEST_NULL;
};

class MpiWorker {
 public:
  // Starts the thread. `comm` stays the communicator's (freed by shutdown(true)).
  MpiWorker(MPI_Comm comm, int rank, int size, const MpiOptions& options);
  ~MpiWorker();
  MpiWorker(const MpiWorker&) = delete;
  MpiWorker& operator=(const MpiWorker&) = delete;

  // Queues `op` and returns its Work. Throws once shut down.
  WorkPtr enqueue(std::unique_ptr<PendingOp> op);
  // The next collective hands MPI an invalid datatype (tests of the error path).
  void inject_error() { inject_next_.store(true); }
  // Completes what is queued, stops the thread and, if free_comm, frees the MPI communicator.
  // Returns false if it had already been shut down.
  bool shutdown(bool free_comm);

  MPI_Comm comm() const { return group_.comm; }
  // From now on, reduce-scatters and all-gathers that `layout` runs in two levels (runs_in_two_levels)
  // run over `groups`, which the worker then owns (freeing those it had). Called by a task, on the
  // worker; the issuing thread reads them once that task has been waited for.
  void set_two_level(const HostLayout& layout, const TwoLevelGroups& groups);
  // The job-wide id (the same on every member) and the watchdog's timeout (0: none).
  std::atomic<uint64_t> id{1};
  std::atomic<double> timeout_s{0};
  std::atomic<uint64_t> issued{0}, completed{0};
  // Set when shutdown() left a thread stuck in a collective running (see there).
  bool detached = false;

 private:
  std::string describe(const PendingOp& op) const;
  bool runs_two_level(const PendingOp& op) const;
  bool skip_for_testing(uint64_t seq) const;
  void provide_staging(PendingOp& op);

  void run();
  void start_pending(std::deque<std::unique_ptr<PendingOp>>& pending,
                     std::vector<std::unique_ptr<PendingOp>>& in_flight, bool& progressed);
  bool test_in_flight(std::vector<std::unique_ptr<PendingOp>>& in_flight);
  bool wait_for_queue(std::unique_lock<std::mutex>& lock);
  int start(PendingOp& op, bool nonblocking);
  void finish(PendingOp& op);
  void run_to_completion(PendingOp& op);
  void run_task_or_reduction(PendingOp& op);
  void succeed(PendingOp& op);
  void fail(PendingOp& op, std::exception_ptr error);
  void fail_mpi(PendingOp& op, int rc);
  void fail_after_earlier_error(PendingOp& op);
  [[noreturn]] void end_job_on_unobserved_failure();

  MpiGroup group_;
  std::shared_ptr<const std::vector<int>> world_ranks_;  // the members' world ranks (the watchdog's)

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<PendingOp>> queue_;  // issued, not yet taken by the worker
  bool stop_ = false;
  std::thread thread_;
  std::atomic<bool> inject_next_{false};
  std::shared_ptr<ReductionStaging> staging_;
  HostLayout layout_;          // two_level set: collectives it runs in two levels go over two_level_
  TwoLevelGroups two_level_;

  // Worker-side failure state (failed_ is also read by shutdown() after the join).
  bool failed_ = false;
  std::string first_error_;
  int first_exit_code_;
  std::chrono::steady_clock::time_point failure_deadline_;
  std::shared_ptr<std::atomic<bool>> failure_observed_;
};

}  // namespace zerodp::comm
