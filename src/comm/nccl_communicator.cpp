#include "comm/nccl_communicator.h"

#if ZERODP_WITH_CUDA

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/gpu_comm_plan.h"
#include "comm/staged_communicator.h"
#include "core/error.h"
#include "core/memory.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/ordered_sum.h"

namespace zerodp::comm {

namespace {

using cuda::DeviceGuard;

cuda::OrderedOp ordered_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return cuda::OrderedOp::kSum;
    case ReduceOp::kAvg: return cuda::OrderedOp::kAvg;
    case ReduceOp::kMax: return cuda::OrderedOp::kMax;
  }
  return cuda::OrderedOp::kSum;
}

}  // namespace

// What the communicator and its Work handles share: the NCCL communicator (null once destroyed) and
// the first failure, after which nothing more is issued.
struct NcclCommunicator::State {
  std::mutex mu;        // guards comm, aborted, first_error
  std::mutex issue_mu;  // one issuing thread at a time (the GPU order is the issue order)
  ncclComm_t comm = nullptr;
  bool aborted = false;
  std::string first_error;
  std::string group;  // "rank r of W on GPU d", for messages

  void record_failure(const std::string& msg) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = msg;
  }
  void throw_if_failed(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (!first_error.empty())
      throw RuntimeFailure(fmt::format("NCCL {} ({}): the communicator failed earlier: {}", what, group, first_error));
  }
  // Kernels of an aborted communicator return; its peers' collectives fail in turn.
  void abort() {
    std::lock_guard<std::mutex> lock(mu);
    if (comm != nullptr && !aborted) {
      (void)ncclCommAbort(comm);
      aborted = true;
    }
  }
  // An asynchronous NCCL error (a peer gone, a network failure), or ncclSuccess.
  ncclResult_t async_error() {
    std::lock_guard<std::mutex> lock(mu);
    if (comm == nullptr || aborted) return ncclSuccess;
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclSuccess;
    return r == ncclInProgress ? ncclSuccess : r;
  }
};

namespace {

void check_nccl(ncclResult_t r, const char* call, const std::string& what, NcclCommunicator::State& state) {
  if (r == ncclSuccess) return;
  const char* detail = state.comm != nullptr ? ncclGetLastError(state.comm) : nullptr;
  throw RuntimeFailure(fmt::format("NCCL {} ({}): {} failed: {}{}{}", what, state.group, call, ncclGetErrorString(r),
                                   detail != nullptr && *detail != '\0' ? ": " : "", detail != nullptr ? detail : ""));
}
#define ZDP_NCCL(call, what, state) check_nccl((call), #call, (what), (state))

// The Work of one NCCL collective: an event recorded on the communication stream after it.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclCommunicator::State> state, std::string what, cudaStream_t compute,
           bool host_blocking, double timeout_s, int device)
      : state_(std::move(state)), what_(std::move(what)), compute_(compute), host_blocking_(host_blocking),
        timeout_s_(timeout_s), device_(device) {
    ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  ~NcclWork() override { (void)cudaEventDestroy(done_); }  // released by CUDA once it has happened
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  cudaEvent_t done() const { return done_; }

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) throw RuntimeFailure(error_);
    if (waited_) return;
    DeviceGuard guard(device_);
    if (host_blocking_ || timeout_s_ > 0) wait_on_host();
    ZDP_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_, 0));
    waited_ = true;
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty() || waited_) return true;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaErrorNotReady) return false;
    if (e != cudaSuccess) (void)cudaGetLastError();
    return true;  // done, or failed: wait() says which
  }

 private:
  // Polls the event (yielding, then sleeping 50 µs), watching NCCL's asynchronous errors and the deadline.
  void wait_on_host() {
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0;; ++round) {
      const cudaError_t e = cudaEventQuery(done_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) fail(fmt::format("CUDA error while waiting: {}: {}", cudaGetErrorName(e), cudaGetErrorString(e)), false);
      if (const ncclResult_t r = state_->async_error(); r != ncclSuccess)
        fail(fmt::format("asynchronous NCCL error: {}", ncclGetErrorString(r)), true);
      if (timeout_s_ > 0) {
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > timeout_s_)
          fail(fmt::format("not done after {:.1f} s (--comm-timeout {} s): a rank did not issue it, or its GPU "
                           "is stuck; NCCL communicator aborted",
                           waited, timeout_s_),
               true);
      }
      if (round < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  [[noreturn]] void fail(const std::string& why, bool abort) {
    error_ = fmt::format("NCCL {} ({}): {}", what_, state_->group, why);
    state_->record_failure(error_);
    if (abort) state_->abort();
    throw RuntimeFailure(error_);
  }

  std::shared_ptr<NcclCommunicator::State> state_;
  const std::string what_;
  const cudaStream_t compute_;
  const bool host_blocking_;
  const double timeout_s_;
  const int device_;
  cudaEvent_t done_ = nullptr;
  std::mutex mu_;
  bool waited_ = false;
  std::string error_;
};

}  // namespace

// ---- construction -------------------------------------------------------------------------------

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Communicator& group, int device, const NcclOptions& options) {
  auto c = std::make_unique<NcclCommunicator>(private_group(group, "NcclCommunicator"), device, options);
  follow(group, *c);
  return c;
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> mpi_group, int device, const NcclOptions& options)
    : DeviceCommunicator(std::move(mpi_group), device, "NcclCommunicator"), options_(options),
      state_(std::make_shared<State>()) {
  const int r = rank(), w = size();
  state_->group = fmt::format("rank {} of {} on GPU {}", r, w, device_);
  DeviceGuard guard(device_);

  // Rank 0 makes the id; the MPI group carries it (host bytes) to the others.
  ncclUniqueId id{};
  if (r == 0) ZDP_NCCL(ncclGetUniqueId(&id), "init", *state_);
  mpi_->broadcast_bytes(&id, sizeof id, 0);
  ncclComm_t comm = nullptr;
  ZDP_NCCL(ncclCommInitRank(&comm, w, id, r), "init", *state_);
  state_->comm = comm;

  try {  // a constructor that throws runs no destructor: what is made so far is released here
    ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    ZDP_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(int)));
    ZDP_CUDA_CHECK(cudaMemset(barrier_word_, 0, sizeof(int)));
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() { release(); }

// Whatever of the communicator exists (each part may be missing); the handles are null afterwards.
void NcclCommunicator::release() noexcept {
  // Nothing may throw here: errors are dropped, the process is usually ending with them.
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device_);
  bool aborted = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    aborted = state_->aborted;
  }
  if (stream_ != nullptr) {
    if (!aborted) (void)cudaStreamSynchronize(stream_);
    if (scratch_ != nullptr) (void)cudaFreeAsync(scratch_, stream_);
    (void)cudaStreamSynchronize(stream_);
  }
  if (scratch_ != nullptr) {
    try {
      MemoryLedger::global().on_free(MemTier::kDevice, MemCategory::kComm, scratch_bytes_);
    } catch (...) {  // a destructor: the ledger's own check failing is not worth an abort
    }
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->comm != nullptr && !state_->aborted) (void)ncclCommDestroy(state_->comm);
    state_->comm = nullptr;
  }
  if (barrier_word_ != nullptr) (void)cudaFree(barrier_word_);
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  barrier_word_ = nullptr;
  ready_ = nullptr;
  stream_ = nullptr;
  scratch_ = nullptr;
  if (previous >= 0) (void)cudaSetDevice(previous);
}

void NcclCommunicator::set_compute_stream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(state_->issue_mu);
  options_.compute_stream = stream;
}

std::unique_ptr<Communicator> NcclCommunicator::make_child(std::unique_ptr<Communicator> mpi_group) {
  return std::make_unique<NcclCommunicator>(std::move(mpi_group), device_, options_);
}

// ---- issuing ----------------------------------------------------------------------------------------

template <class Enqueue>
WorkPtr NcclCommunicator::issue(const std::string& what, bool host_blocking, Enqueue&& enqueue) {
  std::lock_guard<std::mutex> lock(state_->issue_mu);
  state_->throw_if_failed(what);
  DeviceGuard guard(device_);
  // The collective follows what the compute stream has been given so far.
  ZDP_CUDA_CHECK(cudaEventRecord(ready_, options_.compute_stream));
  ZDP_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  auto work = std::make_shared<NcclWork>(state_, what, options_.compute_stream, host_blocking || options_.host_wait,
                                         timeout(), device_);
  try {
    enqueue();
    ZDP_CUDA_CHECK(cudaEventRecord(work->done(), stream_));
  } catch (const std::exception& e) {
    // Half a collective may be enqueued: the ranks no longer agree on what runs.
    state_->record_failure(e.what());
    throw;
  }
  return work;
}

// The slots are GPU memory like any other: counted in the ledger (comm, device tier) while held, so
// that the memory report and --memory-budget see them (the MPI backend's staging is a Buffer).
void NcclCommunicator::ensure_scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return;
  MemoryLedger& ledger = MemoryLedger::global();
  // Stream-ordered: the old slots are released after the collectives already enqueued have used them.
  if (scratch_ != nullptr) {
    ZDP_CUDA_CHECK(cudaFreeAsync(scratch_, stream_));
    ledger.on_free(MemTier::kDevice, MemCategory::kComm, scratch_bytes_);
  }
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  ledger.on_alloc(MemTier::kDevice, MemCategory::kComm, bytes);  // over a budget: throws, nothing held
  try {
    ZDP_CUDA_CHECK(cudaMallocAsync(&scratch_, bytes, stream_));
  } catch (...) {
    ledger.on_free(MemTier::kDevice, MemCategory::kComm, bytes);
    throw;
  }
  scratch_bytes_ = bytes;
}

void NcclCommunicator::enqueue_ordered(const void* send, void* buf, size_t count, DType dtype, ReduceOp op) {
  const std::string what = send != nullptr ? "reduce_scatter" : "all_reduce";
  const int r = rank(), W = size();
  const size_t es = dtype_size(dtype);
  const AllToAllPlan plan = send != nullptr ? reduce_scatter_plan(count, W) : all_reduce_plan(count, W);
  const char* src = static_cast<const char*>(send != nullptr ? send : buf);
  ensure_scratch(plan.scratch_elements() * es);
  char* slots = static_cast<char*>(scratch_);
  const size_t mine = plan.length(r);

  // Everyone's values of chunk r into slots 0..W-1 (this rank's by a copy).
  if (mine > 0)
    ZDP_CUDA_CHECK(cudaMemcpyAsync(slots + plan.offset(r) * es, src + plan.offset(r) * es, mine * es,
                                   cudaMemcpyDeviceToDevice, stream_));
  ncclComm_t comm = state_->comm;
  ZDP_NCCL(ncclGroupStart(), what, *state_);
  try {
    for (int p = 0; p < W; ++p) {
      if (p == r) continue;
      if (plan.length(p) > 0)
        ZDP_NCCL(ncclSend(src + plan.offset(p) * es, plan.length(p) * es, ncclUint8, p, comm, stream_), what, *state_);
      if (mine > 0) ZDP_NCCL(ncclRecv(slots + plan.offset(p) * es, mine * es, ncclUint8, p, comm, stream_), what, *state_);
    }
  } catch (...) {
    (void)ncclGroupEnd();  // left open, the group would take in this thread's later NCCL calls
    throw;
  }
  ZDP_NCCL(ncclGroupEnd(), what, *state_);

  if (send != nullptr) {  // reduce_scatter: the reduced chunk is the result
    cuda::ordered_reduce(slots, plan.chunk, W, buf, count, dtype, ordered_op(op), stream_);
    return;
  }
  // all_reduce: reduce chunk r, then gather the W chunks (in the caller's buffer when they fill it).
  char* gathered = plan.gathers_in_place() ? static_cast<char*>(buf) : slots + plan.receive_elements() * es;
  cuda::ordered_reduce(slots, plan.chunk, W, gathered + plan.offset(r) * es, mine, dtype, ordered_op(op), stream_);
  ZDP_NCCL(ncclAllGather(gathered + plan.offset(r) * es, gathered, plan.chunk * es, ncclUint8, comm, stream_), what,
           *state_);
  if (!plan.gathers_in_place())
    ZDP_CUDA_CHECK(cudaMemcpyAsync(buf, gathered, count * es, cudaMemcpyDeviceToDevice, stream_));
}

// ---- the collectives --------------------------------------------------------------------------------

WorkPtr NcclCommunicator::start_barrier() {
  // A one-word maximum over a zero (no arithmetic that could drift); the host waits for it.
  return issue("barrier", /*host_blocking=*/true, [&] {
    ZDP_NCCL(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclMax, state_->comm, stream_), "barrier",
             *state_);
  });
}

// Broadcasts and all-gathers move bytes (exact); sums, averages and maxima are ordered reductions.
WorkPtr NcclCommunicator::start(const Collective& c) {
  const int W = size();
  if (c.count == 0) return std::make_shared<DoneWork>();
  if (c.kind == CollectiveKind::kAllReduce && W == 1) return std::make_shared<DoneWork>();  // one rank's values
  if (c.kind == CollectiveKind::kReduceScatter && W == 1 && c.in_place) return std::make_shared<DoneWork>();
  const std::string what = describe(c, W, rank());
  return issue(what, false, [&] {
    switch (c.kind) {
      case CollectiveKind::kBroadcast:
        ZDP_NCCL(ncclBroadcast(c.recv, c.recv, c.chunk_bytes(), ncclUint8, c.root, state_->comm, stream_), what,
                 *state_);
        return;
      case CollectiveKind::kAllGather:
        ZDP_NCCL(ncclAllGather(c.send, c.recv, c.chunk_bytes(), ncclUint8, state_->comm, stream_), what, *state_);
        return;
      case CollectiveKind::kAllReduce: enqueue_ordered(nullptr, c.recv, c.count, c.type.dtype(), c.op); return;
      case CollectiveKind::kReduceScatter:
        if (W == 1) {
          ZDP_CUDA_CHECK(cudaMemcpyAsync(c.recv, c.send, c.chunk_bytes(), cudaMemcpyDeviceToDevice, stream_));
        } else {
          enqueue_ordered(c.send, c.recv, c.count, c.type.dtype(), c.op);
        }
        return;
    }
  });
}

// ---- the choice -------------------------------------------------------------------------------------

std::unique_ptr<Communicator> make_gpu_communicator(Communicator& mpi_group, int device, cudaStream_t compute_stream) {
  GpuCommChoice choice = GpuCommChoice::kAuto;
  const char* env = std::getenv("ZERODP_GPU_COMM");
  ZDP_REQUIRE(parse_gpu_comm_choice(env != nullptr ? env : "", &choice),
              "environment variable ZERODP_GPU_COMM='{}': expected auto, nccl or staged", env != nullptr ? env : "");

  DeviceIdentity me;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  me.host = fnv1a64(host, std::strlen(host));
  cudaDeviceProp prop{};
  ZDP_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  me.device = fnv1a64(&prop.uuid, sizeof prop.uuid);
  std::vector<DeviceIdentity> everyone(static_cast<size_t>(mpi_group.size()));
  {
    UntrackedTraffic setup(mpi_group);  // not training traffic
    mpi_group.all_gather_bytes(&me, everyone.data(), sizeof me);
  }
  if (choose_gpu_backend(everyone, choice) == GpuCommBackend::kNccl) {
    NcclOptions options;
    options.compute_stream = compute_stream;
    return NcclCommunicator::create(mpi_group, device, options);
  }
  return StagedCommunicator::create(mpi_group, device, compute_stream);
}

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
