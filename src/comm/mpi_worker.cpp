#include "comm/mpi_worker.h"

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_leak_scope.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_ordered_reduction.h"
#include "comm/reduce_kernels.h"
#include "comm/runtime.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/memory.h"

namespace zerodp::comm {

namespace {
thread_local bool t_on_worker = false;
}  // namespace

bool on_comm_worker_thread() { return t_on_worker; }

// The ordered reductions' staging: one buffer per communicator (the worker runs them one at a time),
// allocated and freed on the issuing thread, so that the ledger sees the same sequence of
// allocations in every run (a buffer the worker allocated would appear at a moment that depends on
// timing, and so would the peaks). Issuing a reduction grows it when it needs more than it has
// (after the reductions issued before it have run); waiting for the last reduction issued frees it.
struct ReductionStaging {
  std::mutex mu;
  Buffer buffer;
  std::weak_ptr<MpiWork> last;  // the last ordered reduction issued, until it is waited for
};

// c10d's Work for the MPI backend: completed by the worker, waited on by anyone.
class MpiWork final : public Work {
 public:
  explicit MpiWork(std::shared_ptr<std::atomic<bool>> failure_observed)
      : failure_observed_(std::move(failure_observed)) {}

  // The watchdog: a wait longer than timeout_s (> 0) gives up, naming the collective.
  struct Watch {
    double timeout_s = 0;
    std::string what;
    uint64_t comm_id = 0, seq = 0;
    std::shared_ptr<const std::vector<int>> world_ranks;
    int world_rank = 0;
  };
  void set_watch(Watch w) { watch_ = std::move(w); }

  void wait() override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (watch_.timeout_s > 0 && !done_) {
        lock.unlock();
        set_waiting_on(fmt::format("{} (#{} on communicator {:016x})", watch_.what, watch_.seq + 1, watch_.comm_id),
                       watch_.comm_id, watch_.seq);
        lock.lock();
        const bool done = cv_.wait_for(lock, std::chrono::duration<double>(watch_.timeout_s), [this] { return done_; });
        lock.unlock();
        if (!done) {  // still "waiting on" it while the others are asked (they may ask this rank too)
          StuckCollective c{watch_.what, watch_.comm_id, watch_.seq, *watch_.world_ranks, watch_.world_rank,
                            watch_.timeout_s};
          throw RuntimeFailure(diagnose_stuck_collective(c));
        }
        clear_waiting();
        lock.lock();
      }
      cv_.wait(lock, [this] { return done_; });
    }
    if (staging_) release_staging_if_last();
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) {
      failure_observed_->store(true);
      std::rethrow_exception(error_);
    }
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

  // Waits for completion without observing an error (that stays for wait()).
  void wait_done() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }

  void complete(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = std::move(error);
    }
    cv_.notify_all();
  }

  void set_staging(std::shared_ptr<ReductionStaging> staging) { staging_ = std::move(staging); }

 private:
  void release_staging_if_last() {
    std::lock_guard<std::mutex> lock(staging_->mu);
    if (staging_->last.lock().get() != this) return;
    staging_->buffer.release();
    staging_->last.reset();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::shared_ptr<std::atomic<bool>> failure_observed_;
  Watch watch_;
  std::shared_ptr<ReductionStaging> staging_;  // ordered reductions only
};

namespace {

bool is_ordered(const PendingOp& op) {
  return op.kind == PendingOp::Kind::kCollective && is_ordered_reduction(op.collective);
}

}  // namespace

MpiWorker::MpiWorker(MPI_Comm comm, int rank, int size, const MpiOptions& options)
    : group_{comm, rank, size, options},
      staging_(std::make_shared<ReductionStaging>()),
      first_exit_code_(static_cast<int>(ExitCode::kFailure)),
      failure_observed_(std::make_shared<std::atomic<bool>>(false)) {
  // The members' world ranks, for the watchdog's message and questions.
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  std::vector<int> local(static_cast<size_t>(size)), global(static_cast<size_t>(size), -1);
  for (int i = 0; i < size; ++i) local[i] = i;
  if (MPI_Comm_group(comm, &mine) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS)
    MPI_Group_translate_ranks(mine, size, local.data(), world, global.data());
  if (mine != MPI_GROUP_NULL) MPI_Group_free(&mine);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  world_ranks_ = std::make_shared<const std::vector<int>>(std::move(global));
  thread_ = std::thread([this] { run(); });
}

MpiWorker::~MpiWorker() { shutdown(false); }

// Testing aid (ZERODP_TEST_SKIP_COLLECTIVE=R:N): world rank R completes the N-th collective (0-based)
// of the world communicator at once, without MPI: a rank that skips a collective.
bool MpiWorker::skip_for_testing(uint64_t seq) const {
  static const std::pair<long, long> skip = [] {
    const char* v = std::getenv("ZERODP_TEST_SKIP_COLLECTIVE");
    long r = -1, n = -1;
    if (v != nullptr && std::sscanf(v, "%ld:%ld", &r, &n) != 2) r = n = -1;
    return std::make_pair(r, n);
  }();
  return skip.first >= 0 && id.load() == 1 && (*world_ranks_)[static_cast<size_t>(group_.rank)] == skip.first &&
         static_cast<long>(seq) == skip.second;
}

WorkPtr MpiWorker::enqueue(std::unique_ptr<PendingOp> op) {
  op->work = std::make_shared<MpiWork>(failure_observed_);
  const uint64_t seq = issued.fetch_add(1);
  if (skip_for_testing(seq)) {  // a rank that skips a collective (tests of the watchdog)
    op->work->complete(nullptr);
    completed.fetch_add(1);
    return op->work;
  }
  if (const double t = timeout_s.load(); t > 0)
    op->work->set_watch(
        {t, describe(*op), id.load(), seq, world_ranks_, (*world_ranks_)[static_cast<size_t>(group_.rank)]});
  WorkPtr work = op->work;
  if (op->kind == PendingOp::Kind::kCollective) op->inject_error = inject_next_.exchange(false);
  // Held until the op is queued: the staging's order of issue is the queue's.
  std::lock_guard<std::mutex> issue(staging_->mu);
  if (is_ordered(*op)) provide_staging(*op);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw RuntimeFailure(fmt::format("{}: issued on a communicator that was shut down", describe(*op)));
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
  return work;
}

// See ReductionStaging; called with its mutex held. Issuing from the worker itself (a task) could
// not wait for it to grow.
void MpiWorker::provide_staging(PendingOp& op) {
  const Collective& c = op.collective;
  const size_t need = runs_two_level(op) ? two_level_staging_bytes(c.count, c.type.dtype(), two_level_.ranks_per_host,
                                                                    c.quantize_across_hosts)
                                         : ordered_reduction_staging_bytes_for(c.kind == CollectiveKind::kAllReduce,
                                                                               c.count, c.type.dtype(), group_.size);
  if (need == 0) return;
  if (need > staging_->buffer.size()) {
    if (auto previous = staging_->last.lock()) {
      ZDP_CHECK(!t_on_worker, "{}: issued from the communicator's own worker", describe(op));
      previous->wait_done();
    }
    staging_->buffer.release();
    staging_->buffer = Buffer(need, MemCategory::kComm);
  }
  op.staging = staging_->buffer.as<char>();
  op.work->set_staging(staging_);
  staging_->last = op.work;
}

void MpiWorker::set_two_level(const HostLayout& layout, const TwoLevelGroups& groups) {
  for (MPI_Comm* c : {&two_level_.within_host, &two_level_.across_hosts})
    if (*c != MPI_COMM_NULL && *c != groups.within_host && *c != groups.across_hosts) MPI_Comm_free(c);
  layout_ = layout;
  two_level_ = groups;
}

bool MpiWorker::runs_two_level(const PendingOp& op) const {
  const Collective& c = op.collective;
  return op.kind == PendingOp::Kind::kCollective &&
         runs_in_two_levels(layout_, c.kind, c.is_reduction() && c.op != ReduceOp::kMax, c.count);
}

bool MpiWorker::shutdown(bool free_comm) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return false;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) {
    if (std::this_thread::get_id() == thread_.get_id()) {
      thread_.detach();  // the worker itself is ending the job
    } else if (std::uncaught_exceptions() > 0 && completed.load() < issued.load()) {
      // A failure (a watchdog timeout, say) is on its way to ending the job while this worker may
      // be blocked in a collective its peers will never join: joining it would hang. It is left
      // running, and the worker alive (MpiCommunicator parks it), until the job ends.
      thread_.detach();
      detached = true;
      return true;
    } else {
      thread_.join();
    }
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (free_comm && !failed_ && !finalized) {
    for (MPI_Comm* c : {&two_level_.within_host, &two_level_.across_hosts, &group_.comm})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
  return true;
}

std::string MpiWorker::describe(const PendingOp& op) const {
  if (op.kind == PendingOp::Kind::kCollective) return comm::describe(op.collective, group_.size, group_.rank);
  return fmt::format("{}() in a group of {} ranks (rank {})", op.kind == PendingOp::Kind::kBarrier ? "barrier" : "task",
                     group_.size, group_.rank);
}

// ---- running one op ---------------------------------------------------------------------------

// Starts (nonblocking) or runs (blocking) the barrier or collective; returns MPI's code.
int MpiWorker::start(PendingOp& op, bool nonblocking) {
  const MPI_Comm comm = group_.comm;
  if (op.kind == PendingOp::Kind::kBarrier) return nonblocking ? MPI_Ibarrier(comm, &op.request) : MPI_Barrier(comm);
  const Collective& c = op.collective;
  if (c.count == 0) return MPI_SUCCESS;  // nothing moves; the request stays null (complete)
  const MPI_Datatype type = op.inject_error ? MPI_DATATYPE_NULL : mpi_type(c.type);
  const int n = static_cast<int>(c.count);
  MPI_Request* req = &op.request;
  switch (c.kind) {
    case CollectiveKind::kBroadcast:
      return nonblocking ? MPI_Ibcast(c.recv, n, type, c.root, comm, req) : MPI_Bcast(c.recv, n, type, c.root, comm);
    case CollectiveKind::kAllReduce: {
      const MPI_Op mop = mpi_op(c.op, c.type.dtype());
      return nonblocking ? MPI_Iallreduce(MPI_IN_PLACE, c.recv, n, type, mop, comm, req)
                         : MPI_Allreduce(MPI_IN_PLACE, c.recv, n, type, mop, comm);
    }
    case CollectiveKind::kReduceScatter: {
      const MPI_Op mop = mpi_op(c.op, c.type.dtype());
      // In place, MPI reads the whole buffer and leaves the result at its start (chunk 0);
      // finish() moves it to the rank's chunk.
      const void* in = c.in_place ? MPI_IN_PLACE : c.send;
      void* out = c.in_place ? in_place_base(c, group_.rank) : c.recv;
      return nonblocking ? MPI_Ireduce_scatter_block(in, out, n, type, mop, comm, req)
                         : MPI_Reduce_scatter_block(in, out, n, type, mop, comm);
    }
    case CollectiveKind::kAllGather: {
      const void* in = c.in_place ? MPI_IN_PLACE : c.send;
      return nonblocking ? MPI_Iallgather(in, n, type, c.recv, n, type, comm, req)
                         : MPI_Allgather(in, n, type, c.recv, n, type, comm);
    }
  }
  return MPI_SUCCESS;
}

// What remains once MPI is done: kAvg's division, the in-place reduce-scatter's copy.
void MpiWorker::finish(PendingOp& op) {
  const Collective& c = op.collective;
  if (op.kind != PendingOp::Kind::kCollective || c.count == 0 || !c.is_reduction()) return;
  void* result = c.in_place && c.kind == CollectiveKind::kReduceScatter ? in_place_base(c, group_.rank) : c.recv;
  if (c.op == ReduceOp::kAvg) divide_in_place(result, c.count, c.type.dtype(), group_.size);
  if (result != c.recv) std::memcpy(c.recv, result, c.chunk_bytes());
}

// Runs a task, an ordered reduction or a blocking collective to completion on this thread.
void MpiWorker::run_to_completion(PendingOp& op) {
  if (op.kind == PendingOp::Kind::kTask || is_ordered(op)) {
    run_task_or_reduction(op);
    return;
  }
  int rc = MPI_SUCCESS;
  if (runs_two_level(op))
    rc = op.inject_error ? MPI_Bcast(op.collective.recv, 1, MPI_DATATYPE_NULL, 0, group_.comm)
                         : run_two_level_all_gather(group_, two_level_, op.collective);
  else if (op.kind == PendingOp::Kind::kCollective && needs_pieces(group_, op.collective))
    rc = run_in_pieces(group_, op.collective, op.inject_error ? MPI_DATATYPE_NULL : mpi_type(op.collective.type));
  else
    rc = start(op, /*nonblocking=*/false);
  if (rc != MPI_SUCCESS)
    fail_mpi(op, rc);
  else
    succeed(op);
}

void MpiWorker::run_task_or_reduction(PendingOp& op) {
  try {
    if (op.kind == PendingOp::Kind::kTask) {
      op.task();
    } else {
      // An injected error fails locally: a broadcast with an invalid datatype moves nothing.
      const int rc = op.inject_error ? MPI_Bcast(op.collective.recv, 1, MPI_DATATYPE_NULL, 0, group_.comm)
                     : runs_two_level(op) ? run_two_level_reduce_scatter(group_, two_level_, op.collective, op.staging)
                                          : run_ordered_reduction(group_, op.collective, op.staging);
      if (rc != MPI_SUCCESS) {
        fail_mpi(op, rc);
        return;
      }
    }
  } catch (...) {
    fail(op, std::current_exception());
    return;
  }
  op.work->complete(nullptr);
  completed.fetch_add(1);
}

void MpiWorker::succeed(PendingOp& op) {
  try {
    finish(op);
  } catch (...) {
    fail(op, std::current_exception());
    return;
  }
  op.work->complete(nullptr);
  completed.fetch_add(1);
}

// The first failure makes the communicator unusable; it is what every later collective reports.
void MpiWorker::fail(PendingOp& op, std::exception_ptr error) {
  if (!failed_) {
    failed_ = true;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      first_error_ = e.what();
      first_exit_code_ = exit_code_of(e);
    } catch (...) {
      first_error_ = "unknown exception";
    }
    failure_deadline_ = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(group_.options.error_grace_s * 1000));
  }
  op.work->complete(std::move(error));
  completed.fetch_add(1);
}

void MpiWorker::fail_mpi(PendingOp& op, int rc) {
  try {
    check_mpi(rc, describe(op));
  } catch (...) {
    fail(op, std::current_exception());
  }
}

void MpiWorker::fail_after_earlier_error(PendingOp& op) {
  fail(op, std::make_exception_ptr(RuntimeFailure(
               fmt::format("{}: not run, the communicator failed earlier: {}", describe(op), first_error_))));
}

void MpiWorker::end_job_on_unobserved_failure() {
  std::fprintf(stderr, "[rank %d] error: %s (no wait() observed this error within %.0f s; ending the job)\n",
               launcher_rank(), first_error_.c_str(), group_.options.error_grace_s);
  std::fflush(stderr);
  abort_job(first_exit_code_);
}

// ---- the loop ---------------------------------------------------------------------------------

// With nothing pending or in flight: waits for the queue (ending the job if a failure stays
// unobserved past its grace). False when stopped with everything issued done.
bool MpiWorker::wait_for_queue(std::unique_lock<std::mutex>& lock) {
  while (queue_.empty() && !stop_) {
    if (failed_ && !failure_observed_->load()) {
      if (cv_.wait_until(lock, failure_deadline_) == std::cv_status::timeout && queue_.empty() &&
          !failure_observed_->load()) {
        lock.unlock();
        end_job_on_unobserved_failure();
      }
    } else {
      cv_.wait(lock);
    }
  }
  return !queue_.empty();
}

// Starts what is pending, in issue order. Tasks, ordered reductions, collectives in pieces and (in
// blocking mode) every collective wait until nothing is in flight, so the order of collectives on
// this communicator is the issue order.
void MpiWorker::start_pending(std::deque<std::unique_ptr<PendingOp>>& pending,
                              std::vector<std::unique_ptr<PendingOp>>& in_flight, bool& progressed) {
  const size_t max_in_flight = static_cast<size_t>(std::max(1, group_.options.max_in_flight));
  while (!pending.empty() && in_flight.size() < max_in_flight) {
    PendingOp& op = *pending.front();
    const bool alone = group_.blocking() || op.kind == PendingOp::Kind::kTask || is_ordered(op) || runs_two_level(op) ||
                       (op.kind == PendingOp::Kind::kCollective && needs_pieces(group_, op.collective));
    if (failed_) {
      fail_after_earlier_error(op);
    } else if (alone) {
      if (!in_flight.empty()) break;
      run_to_completion(op);
    } else if (const int rc = start(op, /*nonblocking=*/true); rc != MPI_SUCCESS) {
      fail_mpi(op, rc);
    } else {
      in_flight.push_back(std::move(pending.front()));
    }
    pending.pop_front();
    progressed = true;
  }
}

// Tests what is in flight (each MPI_Test also drives the library's progress engine); true if any completed.
bool MpiWorker::test_in_flight(std::vector<std::unique_ptr<PendingOp>>& in_flight) {
  bool progressed = false;
  for (auto it = in_flight.begin(); it != in_flight.end();) {
    int done = 0;
    const int rc = MPI_Test(&(*it)->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      fail_mpi(**it, rc);
    } else if (done) {
      succeed(**it);
    } else {
      ++it;
      continue;
    }
    it = in_flight.erase(it);
    progressed = true;
  }
  if (failed_ && !in_flight.empty()) {
    // The peers may never complete these; fail them and leak their state on purpose, since
    // MPI may still write into it (the job is about to end).
    for (auto& op : in_flight) {
      fail_after_earlier_error(*op);
      (void)op.release();
    }
    in_flight.clear();
  }
  return progressed;
}

void MpiWorker::run() {
  t_on_worker = true;
  const MpiLeakScope openmpi_keeps_this;  // this thread runs OpenMPI's code and little else
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // let short sleeps be short (1 µs slack, not 50)
  // A higher priority lets the worker take a core back as soon as a message arrives instead of
  // after the computing threads' time slice. Lowering nice needs CAP_SYS_NICE: without it this
  // quietly keeps the default.
  if (group_.options.worker_nice != 0)
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), group_.options.worker_nice);
  std::deque<std::unique_ptr<PendingOp>> pending;
  std::vector<std::unique_ptr<PendingOp>> in_flight;
  int idle_rounds = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (pending.empty() && in_flight.empty() && !wait_for_queue(lock)) return;
      while (!queue_.empty()) {
        pending.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    bool progressed = false;
    start_pending(pending, in_flight, progressed);
    if (test_in_flight(in_flight)) progressed = true;
    if (in_flight.empty() || progressed) {
      idle_rounds = 0;
    } else {
      back_off(idle_rounds++, group_.options.max_poll_sleep_us);
    }
  }
}

}  // namespace zerodp::comm
