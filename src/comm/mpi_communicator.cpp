#include "comm/mpi_communicator.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/reduce_kernels.h"
#include "comm/runtime.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/memory.h"

namespace zerodp::comm {

// ---- options ----------------------------------------------------------------------------------

const char* progress_mode_name(ProgressMode m) {
  return m == ProgressMode::kPoll ? "poll" : "block";
}

ProgressMode parse_progress_mode(std::string_view name) {
  if (name == "poll") return ProgressMode::kPoll;
  if (name == "block" || name == "blocking") return ProgressMode::kBlocking;
  throw UsageError(fmt::format("unknown progress mode '{}' (expected poll or block)", name));
}

namespace {

long env_long(const char* var, long fallback, long lo, long hi) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  ZDP_REQUIRE(*end == '\0' && x >= lo && x <= hi, "environment variable {}='{}': expected an integer in [{}, {}]",
              var, v, lo, hi);
  return x;
}

}  // namespace

MpiOptions MpiOptions::from_env() {
  MpiOptions o;
  if (const char* p = std::getenv("ZERODP_COMM_PROGRESS"); p != nullptr && *p != '\0') {
    try {
      o.progress = parse_progress_mode(p);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("environment variable ZERODP_COMM_PROGRESS: {}", e.what()));
    }
  }
  o.max_in_flight = static_cast<int>(env_long("ZERODP_COMM_MAX_IN_FLIGHT", o.max_in_flight, 1, 1024));
  o.max_poll_sleep_us = static_cast<int>(env_long("ZERODP_COMM_POLL_SLEEP_US", o.max_poll_sleep_us, 0, 100000));
  o.error_grace_s = static_cast<double>(env_long("ZERODP_COMM_ERROR_GRACE_S", 10, 1, 3600));
  o.worker_nice = static_cast<int>(env_long("ZERODP_COMM_NICE", o.worker_nice, -20, 19));
  o.max_count = static_cast<size_t>(env_long("ZERODP_COMM_MAX_COUNT", static_cast<long>(o.max_count), 1,
                                             static_cast<long>(o.max_count)));
  return o;
}

// ---- MPI errors, types and the 16-bit reductions ----------------------------------------------

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  int error_class = rc;
  MPI_Error_class(rc, &error_class);
  throw RuntimeFailure(fmt::format("{}: MPI error (code {}, class {}): {}", what, rc, error_class,
                                   len > 0 ? std::string_view(text, static_cast<size_t>(len))
                                           : std::string_view("unknown error")));
}

namespace {

// MPI has no bf16 or fp16: both travel as MPI_UINT16_T, reduced by user-defined operators that
// widen to fp32, combine and round once (reduce_kernels.h). All of them commute.
void bf16_sum_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into(in, inout, static_cast<size_t>(*len), DType::kBF16);
}
void bf16_max_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  max_into(in, inout, static_cast<size_t>(*len), DType::kBF16);
}
void fp16_sum_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  sum_into(in, inout, static_cast<size_t>(*len), DType::kF16);
}
void fp16_max_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  max_into(in, inout, static_cast<size_t>(*len), DType::kF16);
}

struct UserOps {
  MPI_Op bf16_sum, bf16_max, fp16_sum, fp16_max;
};

// Created once, after MPI_Init (the first communicator's constructor); MPI_Finalize frees them.
const UserOps& user_ops() {
  static const UserOps ops = [] {
    UserOps o{};
    check_mpi(MPI_Op_create(&bf16_sum_fn, 1, &o.bf16_sum), "MPI_Op_create(bf16 sum)");
    check_mpi(MPI_Op_create(&bf16_max_fn, 1, &o.bf16_max), "MPI_Op_create(bf16 max)");
    check_mpi(MPI_Op_create(&fp16_sum_fn, 1, &o.fp16_sum), "MPI_Op_create(fp16 sum)");
    check_mpi(MPI_Op_create(&fp16_max_fn, 1, &o.fp16_max), "MPI_Op_create(fp16 max)");
    return o;
  }();
  return ops;
}

MPI_Datatype mpi_type(DType t) { return t == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }

// kAvg reduces with the sum; the division by the group size is a pass over the result.
MPI_Op mpi_op(ReduceOp op, DType t) {
  const bool max = op == ReduceOp::kMax;
  switch (t) {
    case DType::kF32: return max ? MPI_MAX : MPI_SUM;
    case DType::kBF16: return max ? user_ops().bf16_max : user_ops().bf16_sum;
    case DType::kF16: return max ? user_ops().fp16_max : user_ops().fp16_sum;
  }
  return MPI_OP_NULL;
}

enum class OpKind : uint8_t { kBarrier, kBroadcast, kAllReduce, kReduceScatter, kAllGather, kTask };

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kBarrier: return "barrier";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAllReduce: return "all_reduce";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kTask: return "task";
  }
  return "?";
}

class MpiWork;

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

// One collective (or task) from issue to completion. Buffers belong to the caller, who keeps them
// alive until the work completes.
struct PendingOp {
  OpKind kind = OpKind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool in_place = false;
  bool bytes = false;  // a byte payload: count bytes of MPI_BYTE (broadcast, all-gather), dtype unused
  bool inject_error = false;
  std::function<void()> task;
  std::shared_ptr<MpiWork> work;
  char* staging = nullptr;  // an ordered reduction's share of the communicator's staging buffer
  MPI_Request request = MPI_REQUEST_NULL;
};

thread_local bool t_on_worker = false;

// An all-reduce of at most this many bytes in all (W·count·size) is one all-gather (run_small_all_reduce).
constexpr uint64_t kSmallAllReduceBytes = 256 * 1024;

}  // namespace

// ---- the worker -------------------------------------------------------------------------------

class MpiCommunicator::Impl {
 public:
  Impl(MPI_Comm comm, int rank, int size, const MpiOptions& options)
      : comm_(comm), rank_(rank), size_(size), options_(options),
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

  // Testing aid (ZERODP_TEST_SKIP_COLLECTIVE=R:N): world rank R completes the N-th collective (0-based)
  // of the world communicator at once, without MPI: a rank that skips a collective.
  bool skip_for_testing(uint64_t seq) const {
    static const std::pair<long, long> skip = [] {
      const char* v = std::getenv("ZERODP_TEST_SKIP_COLLECTIVE");
      long r = -1, n = -1;
      if (v != nullptr && std::sscanf(v, "%ld:%ld", &r, &n) != 2) r = n = -1;
      return std::make_pair(r, n);
    }();
    return skip.first >= 0 && id_.load() == 1 && (*world_ranks_)[static_cast<size_t>(rank_)] == skip.first &&
           static_cast<long>(seq) == skip.second;
  }

  // The job-wide id (the same on every member) and the watchdog's timeout (0: none).
  std::atomic<uint64_t> id_{1};
  std::atomic<double> timeout_s_{0};
  std::atomic<uint64_t> issued_{0}, completed_{0};
  std::shared_ptr<const std::vector<int>> world_ranks_;
  // Set when shutdown() left a worker stuck in a collective running (see there).
  bool detached_ = false;

  ~Impl() { shutdown(false); }

  WorkPtr enqueue(std::unique_ptr<PendingOp> op) {
    op->work = std::make_shared<MpiWork>(failure_observed_);
    const uint64_t seq = issued_.fetch_add(1);
    if (skip_for_testing(seq)) {  // a rank that skips a collective (tests of the watchdog)
      op->work->complete(nullptr);
      completed_.fetch_add(1);
      return op->work;
    }
    if (const double t = timeout_s_.load(); t > 0)
      op->work->set_watch({t, describe(*op), id_.load(), seq, world_ranks_, (*world_ranks_)[static_cast<size_t>(rank_)]});
    WorkPtr work = op->work;
    if (op->kind != OpKind::kBarrier && op->kind != OpKind::kTask)
      op->inject_error = inject_next_.exchange(false);
    // Held until the op is queued: the staging's order of issue is the queue's.
    std::lock_guard<std::mutex> issue(staging_->mu);
    if (is_ordered_reduction(*op)) provide_staging(*op);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_)
        throw RuntimeFailure(fmt::format("{}: issued on a communicator that was shut down", describe(*op)));
      queue_.push_back(std::move(op));
    }
    cv_.notify_one();
    return work;
  }

  void inject_error() { inject_next_.store(true); }

 private:
  // See ReductionStaging; called with its mutex held. Issuing from the worker itself (a task) could
  // not wait for it to grow.
  void provide_staging(PendingOp& op) {
    const size_t need = ordered_reduction_staging_bytes_for(op.kind == OpKind::kAllReduce, op.count, op.dtype, size_);
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

 public:

  // Returns false if it had already been shut down.
  bool shutdown(bool free_comm) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return false;
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) {
      if (std::this_thread::get_id() == thread_.get_id()) {
        thread_.detach();  // the worker itself is ending the job
      } else if (std::uncaught_exceptions() > 0 && completed_.load() < issued_.load()) {
        // A failure (a watchdog timeout, say) is on its way to ending the job while this worker may
        // be blocked in a collective its peers will never join: joining it would hang. It is left
        // running, and its Impl alive (MpiCommunicator parks it), until the job ends.
        thread_.detach();
        detached_ = true;
        return true;
      } else {
        thread_.join();
      }
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (free_comm && !failed_ && !finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    return true;
  }

 private:
  std::string describe(const PendingOp& op) const {
    std::string args;
    switch (op.kind) {
      case OpKind::kBarrier:
      case OpKind::kTask: break;
      case OpKind::kBroadcast:
        args = fmt::format("count={}, dtype={}, root={}", op.count, op.bytes ? "bytes" : dtype_name(op.dtype), op.root);
        break;
      case OpKind::kAllGather:
        args = fmt::format("count={}, dtype={}{}", op.count, op.bytes ? "bytes" : dtype_name(op.dtype),
                           op.in_place ? ", in place" : "");
        break;
      case OpKind::kAllReduce:
      case OpKind::kReduceScatter:
        args = fmt::format("count={}, dtype={}, op={}{}", op.count, dtype_name(op.dtype),
                           reduce_op_name(op.op), op.in_place ? ", in place" : "");
        break;
    }
    return fmt::format("{}({}) in a group of {} ranks (rank {})", op_kind_name(op.kind), args, size_, rank_);
  }

  // ---- ordered reductions ---------------------------------------------------------------------
  //
  // Sums (and averages) do not go through MPI_Allreduce / MPI_Reduce_scatter_block: which
  // algorithm those pick, and so the order in which they add, depends on the message size, the
  // group size and the collective, and a float sum depends on its order. Stage 0 all-reduces a
  // bucket of units where stage 2 reduce-scatters one unit at a time; both must give the same bits.
  // Here every element's result is x_0 + x_1 + ... + x_{W-1}: the ranks' values widened to fp32 and
  // added in rank order, then rounded once to the dtype (16-bit sums thus round once, not once per
  // hop). The element's owner receives everyone's value of it and adds them itself:
  //   reduce-scatter: chunk j (count elements at j·count) belongs to rank j;
  //   all-reduce:     chunk j is [count·j/W, count·(j+1)/W), then an all-gather of the chunks.
  // Every rank sends (W−1)/W of the buffer, as a ring reduce-scatter does, in pieces of at most
  // piece_elements() per peer, so the staging memory stays bounded (category comm).
  static constexpr int kOrderedTag = 0x5a4f;

  // A broadcast or all-gather of more than max_count elements: run in pieces, to completion.
  bool is_large(const PendingOp& op) const {
    return (op.kind == OpKind::kBroadcast || op.kind == OpKind::kAllGather) && op.count > options_.max_count;
  }

  size_t element_size(const PendingOp& op) const { return op.bytes ? 1 : dtype_size(op.dtype); }

  // Broadcasts `count` elements at `buf` from `root` in calls of at most max_count elements.
  int broadcast_in_pieces(char* buf, size_t count, size_t es, MPI_Datatype type, int root) {
    for (size_t k = 0; k < count; k += options_.max_count) {
      const int n = static_cast<int>(std::min(options_.max_count, count - k));
      if (const int rc = MPI_Bcast(buf + k * es, n, type, root, comm_); rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  }

  // A large broadcast: in pieces. A large all-gather: each rank's chunk broadcast from it in turn,
  // in pieces (out of place, the rank's own chunk is copied into place first).
  int run_large(PendingOp& op) {
    const size_t es = element_size(op);
    const MPI_Datatype type = op.inject_error ? MPI_DATATYPE_NULL : op.bytes ? MPI_BYTE : mpi_type(op.dtype);
    char* recv = static_cast<char*>(op.recv);
    if (op.kind == OpKind::kBroadcast) return broadcast_in_pieces(recv, op.count, es, type, op.root);
    const size_t chunk = op.count * es;
    if (!op.in_place) std::memcpy(recv + static_cast<size_t>(rank_) * chunk, op.send, chunk);
    for (int j = 0; j < size_; ++j)
      if (const int rc = broadcast_in_pieces(recv + static_cast<size_t>(j) * chunk, op.count, es, type, j);
          rc != MPI_SUCCESS)
        return rc;
    return MPI_SUCCESS;
  }

  bool is_ordered_reduction(const PendingOp& op) const {
    return (op.kind == OpKind::kAllReduce || op.kind == OpKind::kReduceScatter) && op.op != ReduceOp::kMax &&
           op.count > 0;
  }

  // Completes the requests: MPI_Waitall, or MPI_Testall with the poll mode's back-off.
  int complete_requests(std::vector<MPI_Request>& reqs, bool blocking) {
    if (reqs.empty()) return MPI_SUCCESS;
    const int n = static_cast<int>(reqs.size());
    if (blocking) return MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE);
    for (int idle = 0;; ++idle) {
      int done = 0;
      const int rc = MPI_Testall(n, reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS || done) return rc;
      back_off(idle);
    }
  }

  int run_ordered_reduction(PendingOp& op, bool blocking) {
    const int W = size_, r = rank_;
    const size_t es = dtype_size(op.dtype);
    const MPI_Datatype type = mpi_type(op.dtype);
    if (op.inject_error) return MPI_Bcast(op.recv, 1, MPI_DATATYPE_NULL, 0, comm_);  // fails locally

    const bool scatter = op.kind == OpKind::kReduceScatter;
    if (W == 1) {  // the sum (and the average) of one rank's values is those values
      if (scatter && !op.in_place) std::memcpy(op.recv, op.send, op.count * es);
      return MPI_SUCCESS;
    }
    if (!scatter && static_cast<uint64_t>(W) * op.count * es <= kSmallAllReduceBytes)
      return run_small_all_reduce(op, blocking);
    std::vector<size_t> begin(static_cast<size_t>(W) + 1);
    for (int j = 0; j <= W; ++j)
      begin[j] = scatter ? static_cast<size_t>(j) * op.count : op.count * static_cast<size_t>(j) / static_cast<size_t>(W);
    const auto len = [&](int j) { return begin[j + 1] - begin[j]; };
    // The W chunks to reduce, and where this rank's reduced chunk goes.
    const char* in = static_cast<const char*>(scatter ? (op.in_place ? in_place_base(op) : op.send) : op.recv);
    char* out = static_cast<char*>(op.recv) + (scatter ? 0 : begin[r] * es);

    size_t longest = 0;
    for (int j = 0; j < W; ++j) longest = std::max(longest, len(j));
    const size_t piece = std::min(longest, ordered_reduction_piece_elements(W));
    float* acc = reinterpret_cast<float*>(op.staging);
    // Peer j's values in slot j (j < r) or j − 1; one slot more than needed keeps the size formula
    // shared with the small all-reduce (W slots of n values).
    char* slots = op.staging + piece * sizeof(float);

    std::vector<MPI_Request> reqs;
    reqs.reserve(2 * static_cast<size_t>(W));
    for (size_t k = 0; k < longest; k += piece) {
      const auto part = [&](int j) { return k < len(j) ? std::min(piece, len(j) - k) : size_t{0}; };
      const size_t mine = part(r);
      reqs.clear();
      for (int j = 0; j < W; ++j) {
        if (j == r) continue;
        const size_t slot = static_cast<size_t>(j < r ? j : j - 1);
        int rc = MPI_SUCCESS;
        if (mine > 0) {
          reqs.emplace_back();
          rc = MPI_Irecv(slots + slot * piece * es, static_cast<int>(mine), type, j, kOrderedTag, comm_, &reqs.back());
        }
        if (rc == MPI_SUCCESS && part(j) > 0) {
          reqs.emplace_back();
          rc = MPI_Isend(in + (begin[j] + k) * es, static_cast<int>(part(j)), type, j, kOrderedTag, comm_,
                         &reqs.back());
        }
        if (rc != MPI_SUCCESS) return rc;
      }
      if (const int rc = complete_requests(reqs, blocking); rc != MPI_SUCCESS) return rc;
      if (mine == 0) continue;
      if (op.dtype == DType::kF32) {  // no widening or rounding: one pass, the same sums in the same order
        std::vector<const float*> rows(static_cast<size_t>(W));
        for (int j = 0; j < W; ++j)
          rows[j] = reinterpret_cast<const float*>(
              j == r ? in + (begin[r] + k) * es : slots + static_cast<size_t>(j < r ? j : j - 1) * piece * es);
        sum_f32_in_order(rows.data(), W, reinterpret_cast<float*>(out + k * es), mine,
                         op.op == ReduceOp::kAvg ? W : 1);
        continue;
      }
      for (int j = 0; j < W; ++j) {
        const char* x = j == r ? in + (begin[r] + k) * es : slots + static_cast<size_t>(j < r ? j : j - 1) * piece * es;
        if (j == 0)
          widen_to_f32(x, op.dtype, acc, mine);
        else
          accumulate_f32(x, op.dtype, acc, mine);
      }
      if (op.op == ReduceOp::kAvg)
        for (size_t i = 0; i < mine; ++i) acc[i] /= static_cast<float>(W);
      narrow_from_f32(acc, out + k * es, op.dtype, mine);
    }
    if (scatter) return MPI_SUCCESS;

    if (op.count > options_.max_count) {  // displacements past int: each chunk from its owner, in pieces
      for (int j = 0; j < W; ++j)
        if (const int rc = broadcast_in_pieces(static_cast<char*>(op.recv) + begin[j] * es, len(j), es, type, j);
            rc != MPI_SUCCESS)
          return rc;
      return MPI_SUCCESS;
    }
    std::vector<int> counts(static_cast<size_t>(W)), displs(static_cast<size_t>(W));
    for (int j = 0; j < W; ++j) {
      counts[j] = static_cast<int>(len(j));
      displs[j] = static_cast<int>(begin[j]);
    }
    if (blocking)
      return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op.recv, counts.data(), displs.data(), type, comm_);
    std::vector<MPI_Request> gather(1);
    const int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, op.recv, counts.data(), displs.data(), type,
                                   comm_, gather.data());
    return rc != MPI_SUCCESS ? rc : complete_requests(gather, blocking);
  }

  // A small all-reduce (the loss and norm sums, tiny buckets; kSmallAllReduceBytes) is
  // latency-bound: every rank gathers every rank's values in one MPI_Allgather and adds them all
  // itself, in the same rank order, so all ranks hold the same bits without a second phase.

  int run_small_all_reduce(PendingOp& op, bool blocking) {
    const int W = size_;
    const size_t n = op.count, es = dtype_size(op.dtype);
    const MPI_Datatype type = mpi_type(op.dtype);
    float* acc = reinterpret_cast<float*>(op.staging);
    char* all = op.staging + n * sizeof(float);  // W·n values, rank j's at j·n
    std::vector<MPI_Request> req(1);
    const int rc = blocking ? MPI_Allgather(op.recv, static_cast<int>(n), type, all, static_cast<int>(n), type, comm_)
                            : MPI_Iallgather(op.recv, static_cast<int>(n), type, all, static_cast<int>(n), type,
                                             comm_, req.data());
    if (rc != MPI_SUCCESS) return rc;
    if (!blocking)
      if (const int rc2 = complete_requests(req, blocking); rc2 != MPI_SUCCESS) return rc2;
    widen_to_f32(all, op.dtype, acc, n);
    for (int j = 1; j < W; ++j) accumulate_f32(all + static_cast<size_t>(j) * n * es, op.dtype, acc, n);
    if (op.op == ReduceOp::kAvg)
      for (size_t i = 0; i < n; ++i) acc[i] /= static_cast<float>(W);
    narrow_from_f32(acc, op.recv, op.dtype, n);
    return MPI_SUCCESS;
  }

  // Starts (nonblocking) or runs (blocking) the collective; returns MPI's code.
  int start(PendingOp& op, bool nonblocking) {
    if (op.kind == OpKind::kBarrier)
      return nonblocking ? MPI_Ibarrier(comm_, &op.request) : MPI_Barrier(comm_);
    if (op.count == 0) return MPI_SUCCESS;  // nothing moves; the request stays null (complete)
    const MPI_Datatype type = op.inject_error ? MPI_DATATYPE_NULL : op.bytes ? MPI_BYTE : mpi_type(op.dtype);
    const int n = static_cast<int>(op.count);
    MPI_Request* req = &op.request;
    switch (op.kind) {
      case OpKind::kBroadcast:
        return nonblocking ? MPI_Ibcast(op.recv, n, type, op.root, comm_, req)
                           : MPI_Bcast(op.recv, n, type, op.root, comm_);
      case OpKind::kAllReduce: {
        const MPI_Op mop = mpi_op(op.op, op.dtype);
        return nonblocking ? MPI_Iallreduce(MPI_IN_PLACE, op.recv, n, type, mop, comm_, req)
                           : MPI_Allreduce(MPI_IN_PLACE, op.recv, n, type, mop, comm_);
      }
      case OpKind::kReduceScatter: {
        const MPI_Op mop = mpi_op(op.op, op.dtype);
        // In place, MPI reads the whole buffer and leaves the result at its start (chunk 0);
        // finish() moves it to the rank's chunk.
        const void* in = op.in_place ? MPI_IN_PLACE : op.send;
        void* out = op.in_place ? in_place_base(op) : op.recv;
        return nonblocking ? MPI_Ireduce_scatter_block(in, out, n, type, mop, comm_, req)
                           : MPI_Reduce_scatter_block(in, out, n, type, mop, comm_);
      }
      case OpKind::kAllGather: {
        const void* in = op.in_place ? MPI_IN_PLACE : op.send;
        return nonblocking ? MPI_Iallgather(in, n, type, op.recv, n, type, comm_, req)
                           : MPI_Allgather(in, n, type, op.recv, n, type, comm_);
      }
      case OpKind::kBarrier:
      case OpKind::kTask: break;
    }
    return MPI_SUCCESS;
  }

  // The start of an in-place reduce-scatter's buffer: recv = send + rank·count, and writable.
  char* in_place_base(const PendingOp& op) const {
    return static_cast<char*>(op.recv) - static_cast<size_t>(rank_) * op.count * dtype_size(op.dtype);
  }

  // What remains once MPI is done: kAvg's division, the in-place reduce-scatter's copy.
  void finish(PendingOp& op) {
    if (op.count == 0) return;
    if (op.kind == OpKind::kAllReduce || op.kind == OpKind::kReduceScatter) {
      void* result = op.in_place && op.kind == OpKind::kReduceScatter ? in_place_base(op) : op.recv;
      if (op.op == ReduceOp::kAvg) divide_in_place(result, op.count, op.dtype, size_);
      if (result != op.recv) std::memcpy(op.recv, result, op.count * dtype_size(op.dtype));
    }
  }

  void succeed(PendingOp& op) {
    try {
      finish(op);
    } catch (...) {
      fail(op, std::current_exception());
      return;
    }
    op.work->complete(nullptr);
    completed_.fetch_add(1);
  }

  // The first failure makes the communicator unusable; it is what every later collective reports.
  void fail(PendingOp& op, std::exception_ptr error) {
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
                          std::chrono::milliseconds(static_cast<long>(options_.error_grace_s * 1000));
    }
    op.work->complete(std::move(error));
    completed_.fetch_add(1);
  }

  void fail_mpi(PendingOp& op, int rc) {
    try {
      check_mpi(rc, describe(op));
    } catch (...) {
      fail(op, std::current_exception());
    }
  }

  void fail_after_earlier_error(PendingOp& op) {
    fail(op, std::make_exception_ptr(RuntimeFailure(fmt::format(
                 "{}: not run, the communicator failed earlier: {}", describe(op), first_error_))));
  }

  // Runs a task, an ordered reduction or a blocking collective to completion on this thread.
  void run_to_completion(PendingOp& op, bool blocking) {
    if (is_ordered_reduction(op)) {
      try {
        const int rc = run_ordered_reduction(op, blocking);
        if (rc != MPI_SUCCESS) {
          fail_mpi(op, rc);
          return;
        }
      } catch (...) {
        fail(op, std::current_exception());
        return;
      }
      op.work->complete(nullptr);
      completed_.fetch_add(1);
      return;
    }
    if (op.kind == OpKind::kTask) {
      try {
        op.task();
      } catch (...) {
        fail(op, std::current_exception());
        return;
      }
      op.work->complete(nullptr);
      completed_.fetch_add(1);
      return;
    }
    const int rc = is_large(op) ? run_large(op) : start(op, /*nonblocking=*/false);
    if (rc != MPI_SUCCESS)
      fail_mpi(op, rc);
    else
      succeed(op);
  }

  // Between two rounds of tests that completed nothing: first yield (a collective in flight often
  // needs only the peer's next step), then sleep, doubling up to max_poll_sleep_us, so that a long
  // transfer does not take a core from the caller's compute.
  void back_off(int idle_rounds) {
    constexpr int kYieldRounds = 32;
    if (idle_rounds < kYieldRounds || options_.max_poll_sleep_us == 0) {
      sched_yield();
      return;
    }
    const int shift = std::min(idle_rounds - kYieldRounds, 16);
    const long us = std::min<long>(options_.max_poll_sleep_us, 1L << shift);
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  [[noreturn]] void end_job_on_unobserved_failure() {
    std::fprintf(stderr, "[rank %d] error: %s (no wait() observed this error within %.0f s; ending the job)\n",
                 launcher_rank(), first_error_.c_str(), options_.error_grace_s);
    std::fflush(stderr);
    abort_job(first_exit_code_);
  }

  void run() {
    t_on_worker = true;
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // let short sleeps be short (1 µs slack, not 50)
    // A higher priority lets the worker take a core back as soon as a message arrives instead of
    // after the computing threads' time slice. Lowering nice needs CAP_SYS_NICE: without it this
    // quietly keeps the default.
    if (options_.worker_nice != 0)
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), options_.worker_nice);
    const bool blocking = options_.progress == ProgressMode::kBlocking;
    const size_t max_in_flight = static_cast<size_t>(std::max(1, options_.max_in_flight));
    std::deque<std::unique_ptr<PendingOp>> pending;
    std::vector<std::unique_ptr<PendingOp>> in_flight;
    int idle_rounds = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (pending.empty() && in_flight.empty()) {
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
          if (queue_.empty()) return;  // stopped, and everything issued is done
        }
        while (!queue_.empty()) {
          pending.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }

      bool progressed = false;
      // Start what is pending, in issue order. Tasks and blocking collectives wait until nothing
      // is in flight, so the order of collectives on this communicator is the issue order.
      while (!pending.empty() && in_flight.size() < max_in_flight) {
        PendingOp& op = *pending.front();
        if (failed_) {
          fail_after_earlier_error(op);
        } else if (blocking || op.kind == OpKind::kTask || is_ordered_reduction(op) || is_large(op)) {
          if (!in_flight.empty()) break;
          run_to_completion(op, blocking);
        } else if (const int rc = start(op, /*nonblocking=*/true); rc != MPI_SUCCESS) {
          fail_mpi(op, rc);
        } else {
          in_flight.push_back(std::move(pending.front()));
        }
        pending.pop_front();
        progressed = true;
      }

      // Test what is in flight; each MPI_Test also drives the library's progress engine.
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

      if (in_flight.empty() || progressed) {
        idle_rounds = 0;
      } else {
        back_off(idle_rounds++);
      }
    }
  }

 public:
  MPI_Comm comm_;

 private:
  const int rank_;
  const int size_;
  const MpiOptions options_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<PendingOp>> queue_;  // issued, not yet taken by the worker
  bool stop_ = false;
  std::thread thread_;
  std::atomic<bool> inject_next_{false};
  std::shared_ptr<ReductionStaging> staging_ = std::make_shared<ReductionStaging>();

  // Worker-side failure state (failed_ is also read by shutdown() after the join).
  bool failed_ = false;
  std::string first_error_;
  int first_exit_code_ = static_cast<int>(ExitCode::kFailure);
  std::chrono::steady_clock::time_point failure_deadline_;
  std::shared_ptr<std::atomic<bool>> failure_observed_;
};

// ---- sizes of the ordered reductions ----------------------------------------------------------

size_t ordered_reduction_piece_elements(int group_size) {
  // About 1 MiB of fp32 staging whatever the group size, and never pieces so small that the
  // per-message cost dominates.
  return std::max<size_t>(size_t{1} << 12, (size_t{1} << 18) / static_cast<size_t>(std::max(1, group_size)));
}

size_t ordered_reduction_staging_bytes(size_t chunk_elements, DType dtype, int group_size) {
  const size_t piece = std::min(chunk_elements, ordered_reduction_piece_elements(group_size));
  return piece * sizeof(float) + static_cast<size_t>(group_size) * piece * dtype_size(dtype);
}

size_t ordered_reduction_staging_bytes_for(bool all_reduce, size_t count, DType dtype, int group_size) {
  if (group_size <= 1 || count == 0) return 0;
  const auto W = static_cast<size_t>(group_size);
  if (!all_reduce) return ordered_reduction_staging_bytes(count, dtype, group_size);  // chunks of count
  if (W * count * dtype_size(dtype) <= kSmallAllReduceBytes)
    return ordered_reduction_staging_bytes(count, dtype, group_size);  // everyone's whole buffer
  return ordered_reduction_staging_bytes((count + W - 1) / W, dtype, group_size);  // the longest chunk
}

// ---- the registry of live communicators (for finalize) --------------------------------------

namespace {

// Never destroyed: communicators held in other static objects (the world) may unregister during
// static destruction, after a function-local static would be gone.
std::mutex& registry_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<MpiCommunicator*>& registry() {
  static auto* live = new std::vector<MpiCommunicator*>;
  return *live;
}

}  // namespace

void shutdown_all_mpi_communicators() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (MpiCommunicator* c : registry()) c->shutdown(/*free_comm=*/false);
}

bool on_comm_worker_thread() { return t_on_worker; }

// ---- MpiCommunicator --------------------------------------------------------------------------

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& options) : options_(options) {
  ZDP_CHECK(comm != MPI_COMM_NULL, "MpiCommunicator needs a communicator, got MPI_COMM_NULL");
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  (void)user_ops();
  impl_ = std::make_unique<Impl>(comm, rank_, size_, options_);
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

MpiCommunicator::~MpiCommunicator() {
  shutdown(/*free_comm=*/true);
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& live = registry();
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }
  if (impl_->detached_) {
    // Its worker still runs (blocked in a collective while the job is being ended): keep what it uses.
    static auto* parked = new std::vector<Impl*>;
    parked->push_back(impl_.release());
  }
}

std::optional<uint64_t> collectives_issued_on(uint64_t comm_id) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (MpiCommunicator* c : registry())
    if (c->id() == comm_id) return c->collectives_issued();
  return std::nullopt;
}

uint64_t MpiCommunicator::id() const { return impl_->id_.load(); }
uint64_t MpiCommunicator::collectives_issued() const { return impl_->issued_.load(); }

void MpiCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  impl_->timeout_s_ = seconds;
}

namespace {
// A split's id: from its parent's, the parent's count of splits so far and its color (so every
// member derives the same, and different splits differ).
uint64_t child_id(uint64_t parent, uint64_t split_number, int64_t color) {
  uint64_t h = parent * 0x9E3779B97F4A7C15ull + split_number + 1;
  h ^= static_cast<uint64_t>(color + 2) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h == 1 ? 2 : h;  // 1 is the world's
}
}  // namespace

void MpiCommunicator::shutdown(bool free_comm) { impl_->shutdown(free_comm); }

MPI_Comm MpiCommunicator::handle() const { return impl_->comm_; }

void MpiCommunicator::inject_mpi_error_for_testing() { impl_->inject_error(); }

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  return split_mpi(color, key, options_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key, const MpiOptions& options) {
  MPI_Comm out = MPI_COMM_NULL;
  auto op = std::make_unique<PendingOp>();
  op->kind = OpKind::kTask;
  const MPI_Comm parent = impl_->comm_;
  const int r = rank_, w = size_;
  op->task = [parent, color, key, r, w, &out] {
    check_mpi(MPI_Comm_split(parent, color < 0 ? MPI_UNDEFINED : color, key, &out),
              fmt::format("split(color={}, key={}) of a group of {} ranks (rank {})", color, key, w, r));
  };
  impl_->enqueue(std::move(op))->wait();
  const uint64_t number = splits_++;
  if (out == MPI_COMM_NULL) return nullptr;
  auto sub = std::make_unique<MpiCommunicator>(out, options);
  sub->set_traffic_ledger(traffic_);
  sub->impl_->id_ = child_id(id(), number, color);
  sub->set_timeout(timeout());
  return sub;
}

std::unique_ptr<Communicator> MpiCommunicator::split_by_host() {
  MPI_Comm out = MPI_COMM_NULL;
  auto op = std::make_unique<PendingOp>();
  op->kind = OpKind::kTask;
  const MPI_Comm parent = impl_->comm_;
  const int r = rank_, w = size_;
  op->task = [parent, r, w, &out] {
    check_mpi(MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &out),
              fmt::format("split by host of a group of {} ranks (rank {})", w, r));
  };
  impl_->enqueue(std::move(op))->wait();
  const uint64_t number = splits_++;
  auto sub = std::make_unique<MpiCommunicator>(out, options_);
  sub->set_traffic_ledger(traffic_);
  sub->impl_->id_ = child_id(id(), number, -3);  // by host: every member's "color" alike
  sub->set_timeout(timeout());
  return sub;
}

namespace {

// Sums run in pieces (ordered reductions), broadcasts and all-gathers in pieces of max_count; a max
// goes to MPI in one call, whose count is an int.
void check_count(const char* what, size_t count) {
  ZDP_CHECK(count <= static_cast<size_t>(INT_MAX),
            "{} of {} elements: the MPI backend takes at most {} elements per max-reduction", what, count, INT_MAX);
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

std::unique_ptr<PendingOp> make_op(OpKind kind, size_t count, DType dtype) {
  auto op = std::make_unique<PendingOp>();
  op->kind = kind;
  op->count = count;
  op->dtype = dtype;
  return op;
}

}  // namespace

WorkPtr MpiCommunicator::barrier_async() { return impl_->enqueue(make_op(OpKind::kBarrier, 0, DType::kF32)); }

WorkPtr MpiCommunicator::broadcast_async(void* buf, size_t count, DType dtype, int root) {
  ZDP_CHECK(root >= 0 && root < size_, "broadcast from root {} in a group of {} ranks", root, size_);
  ZDP_CHECK(buf != nullptr || count == 0, "broadcast of {} elements from a null buffer", count);
  auto op = make_op(OpKind::kBroadcast, count, dtype);
  op->recv = buf;
  op->root = root;
  WorkPtr work = impl_->enqueue(std::move(op));
  traffic_->record(CollectiveKind::kBroadcast, count * dtype_size(dtype), size_, successor_in_other_group_);
  return work;
}

WorkPtr MpiCommunicator::all_reduce_async(void* buf, size_t count, DType dtype, ReduceOp rop) {
  if (rop == ReduceOp::kMax) check_count("all_reduce (max)", count);
  ZDP_CHECK(buf != nullptr || count == 0, "all_reduce of {} elements on a null buffer", count);
  auto op = make_op(OpKind::kAllReduce, count, dtype);
  op->recv = buf;
  op->op = rop;
  op->in_place = true;
  WorkPtr work = impl_->enqueue(std::move(op));
  traffic_->record(CollectiveKind::kAllReduce, count * dtype_size(dtype), size_, successor_in_other_group_);
  return work;
}

WorkPtr MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t count, DType dtype,
                                              ReduceOp rop) {
  if (rop == ReduceOp::kMax) check_count("reduce_scatter (max)", count);
  const size_t chunk = count * dtype_size(dtype);
  auto op = make_op(OpKind::kReduceScatter, count, dtype);
  op->send = send;
  op->recv = recv;
  op->op = rop;
  if (count > 0) {
    ZDP_CHECK(send != nullptr && recv != nullptr, "reduce_scatter of {} elements with a null buffer", count);
    op->in_place = static_cast<const char*>(send) + static_cast<size_t>(rank_) * chunk == recv;
    ZDP_CHECK(op->in_place || !overlaps(send, chunk * size_, recv, chunk),
              "reduce_scatter: recv overlaps send without being send + rank·count (the in-place form)");
  }
  WorkPtr work = impl_->enqueue(std::move(op));
  traffic_->record(CollectiveKind::kReduceScatter, chunk * size_, size_, successor_in_other_group_);
  return work;
}

WorkPtr MpiCommunicator::all_gather_async(const void* send, void* recv, size_t count, DType dtype) {
  return all_gather_op(send, recv, count, dtype, /*bytes=*/false);
}

// count: elements of dtype, or bytes (dtype then ignored: the op moves MPI_BYTE).
WorkPtr MpiCommunicator::all_gather_op(const void* send, void* recv, size_t count, DType dtype, bool bytes) {
  const size_t chunk = bytes ? count : count * dtype_size(dtype);
  auto op = make_op(OpKind::kAllGather, count, bytes ? DType::kF32 : dtype);
  op->bytes = bytes;
  op->send = send;
  op->recv = recv;
  if (count > 0) {
    ZDP_CHECK(send != nullptr && recv != nullptr, "all_gather of {} {} with a null buffer", count,
              bytes ? "bytes" : "elements");
    op->in_place = static_cast<char*>(recv) + static_cast<size_t>(rank_) * chunk == send;
    ZDP_CHECK(op->in_place || !overlaps(send, chunk, recv, chunk * size_),
              "all_gather: send overlaps recv without being recv + rank·count (the in-place form)");
  }
  WorkPtr work = impl_->enqueue(std::move(op));
  traffic_->record(CollectiveKind::kAllGather, chunk * size_, size_, successor_in_other_group_);
  return work;
}

WorkPtr MpiCommunicator::broadcast_bytes_async(void* buf, size_t bytes, int root) {
  ZDP_CHECK(root >= 0 && root < size_, "broadcast from root {} in a group of {} ranks", root, size_);
  ZDP_CHECK(buf != nullptr || bytes == 0, "broadcast of {} bytes from a null buffer", bytes);
  auto op = make_op(OpKind::kBroadcast, bytes, DType::kF32);
  op->bytes = true;
  op->recv = buf;
  op->root = root;
  WorkPtr work = impl_->enqueue(std::move(op));
  traffic_->record(CollectiveKind::kBroadcast, bytes, size_, successor_in_other_group_);
  return work;
}

WorkPtr MpiCommunicator::all_gather_bytes_async(const void* send, void* recv, size_t bytes) {
  return all_gather_op(send, recv, bytes, DType::kF32, /*bytes=*/true);
}

}  // namespace zerodp::comm
