#include "comm/staged_communicator.h"

#if ZERODP_WITH_CUDA

#include <algorithm>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "comm/gpu_comm_plan.h"
#include "comm/nccl_communicator.h"
#include "core/error.h"
#include "core/memory.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"

namespace zerodp::comm {

namespace {

using cuda::DeviceGuard;

}  // namespace

// What the communicator and its Work handles share: the copy stream and the pinned blocks, kept
// until the last of them is gone (a Work may outlive its communicator).
class StagedCommunicator::Pool {
 public:
  explicit Pool(int device) : device(device) {
    DeviceGuard guard(device);
    ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  }
  ~Pool() {
    (void)cudaSetDevice(device);
    (void)cudaStreamSynchronize(copy);
    for (Block& b : blocks_) {
      (void)cudaFreeHost(b.data);
      try {
        MemoryLedger::global().on_free(MemTier::kHost, MemCategory::kComm, b.bytes);
      } catch (...) {  // a destructor
      }
    }
    (void)cudaStreamDestroy(copy);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A free block of at least `bytes` (the smallest that fits), or a new one; back in the pool when
  // the returned pointer's last copy goes.
  static std::shared_ptr<char> lease(const std::shared_ptr<Pool>& pool, size_t bytes) {
    std::lock_guard<std::mutex> lock(pool->mu_);
    size_t best = pool->blocks_.size();
    for (size_t i = 0; i < pool->blocks_.size(); ++i) {
      const Block& b = pool->blocks_[i];
      if (!b.busy && b.bytes >= bytes && (best == pool->blocks_.size() || b.bytes < pool->blocks_[best].bytes)) best = i;
    }
    if (best == pool->blocks_.size()) {
      Block b;
      b.bytes = std::max<size_t>(bytes, size_t{64} << 10);  // small payloads share one size
      DeviceGuard guard(pool->device);
      ZDP_CUDA_CHECK(cudaMallocHost(&b.data, b.bytes));
      // Page-locked host memory the collectives stage through: the ledger's host tier, comm.
      MemoryLedger::global().on_alloc(MemTier::kHost, MemCategory::kComm, b.bytes);
      pool->blocks_.push_back(b);
    }
    pool->blocks_[best].busy = true;
    return std::shared_ptr<char>(static_cast<char*>(pool->blocks_[best].data), [pool, best](char*) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->blocks_[best].busy = false;
    });
  }

  const int device;
  cudaStream_t copy = nullptr;
  std::mutex issue_mu;  // one issuing thread at a time (the MPI order is the issue order)

 private:
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
    bool busy = false;
  };
  std::mutex mu_;
  std::vector<Block> blocks_;  // indices are stable: blocks are only appended
};

struct StagedCommunicator::Staged {
  std::shared_ptr<char> block;
};

namespace {

// The Work of a staged collective: the MPI part, then the copy of `bytes` back to the device.
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr mpi, std::shared_ptr<char> block, std::shared_ptr<StagedCommunicator::Pool> pool,
             void* device_dst, const char* host_src, size_t bytes)
      : mpi_(std::move(mpi)), block_(std::move(block)), pool_(std::move(pool)), device_dst_(device_dst),
        host_src_(host_src), bytes_(bytes) {}
  ~StagedWork() override {
    // MPI may still be using the block: it goes back to the pool only once the collective is done.
    if (!done_ && block_ != nullptr) {
      try {
        mpi_->wait();
      } catch (...) {  // the error belongs to whoever waits; nobody did
      }
    }
  }
  StagedWork(const StagedWork&) = delete;
  StagedWork& operator=(const StagedWork&) = delete;

  void wait() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.empty()) throw RuntimeFailure(error_);
    if (done_) return;
    try {
      mpi_->wait();
      if (bytes_ > 0) {
        DeviceGuard guard(pool_->device);
        ZDP_CUDA_CHECK(cudaMemcpyAsync(device_dst_, host_src_, bytes_, cudaMemcpyHostToDevice, pool_->copy));
        ZDP_CUDA_CHECK(cudaStreamSynchronize(pool_->copy));
      }
    } catch (const std::exception& e) {
      error_ = e.what();
      done_ = true;
      block_.reset();
      throw;
    }
    done_ = true;
    block_.reset();
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ || mpi_->is_completed();
  }

 private:
  WorkPtr mpi_;
  std::shared_ptr<char> block_;
  std::shared_ptr<StagedCommunicator::Pool> pool_;
  void* device_dst_;
  const char* host_src_;
  size_t bytes_;
  std::mutex mu_;
  bool done_ = false;
  std::string error_;
};

bool on_host(const char* kind, std::initializer_list<const void*> buffers) {
  int host = 0, device = 0;
  for (const void* p : buffers) {
    if (p == nullptr) continue;
    (is_device_pointer(p) ? device : host) += 1;
  }
  ZDP_CHECK(host == 0 || device == 0, "{}: host and device buffers in one collective", kind);
  return host > 0;
}

}  // namespace

std::unique_ptr<StagedCommunicator> StagedCommunicator::create(Communicator& group, int device,
                                                               cudaStream_t compute_stream) {
  std::unique_ptr<Communicator> own = group.split(0, group.rank());
  ZDP_CHECK(own != nullptr, "StagedCommunicator: the private split of the group failed");
  auto c = std::make_unique<StagedCommunicator>(std::move(own), device, compute_stream);
  c->set_traffic_ledger(&group.traffic());
  c->set_successor_in_other_group(group.successor_in_other_group());
  c->set_timeout(group.timeout());
  return c;
}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> mpi_group, int device, cudaStream_t compute_stream)
    : mpi_(std::move(mpi_group)), device_(device), compute_(compute_stream) {
  ZDP_CHECK(mpi_ != nullptr, "StagedCommunicator needs an MPI group");
  mpi_->set_traffic_ledger(&untracked_);
  pool_ = std::make_shared<Pool>(device);
  DeviceGuard guard(device_);
  ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

StagedCommunicator::~StagedCommunicator() {
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
}

void StagedCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  mpi_->set_timeout(seconds);
}

std::unique_ptr<Communicator> StagedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> sub = mpi_->split(color, key);
  if (sub == nullptr) return nullptr;
  return inherit(std::make_unique<StagedCommunicator>(std::move(sub), device_, compute_));
}

std::unique_ptr<Communicator> StagedCommunicator::split_by_host() {
  return inherit(std::make_unique<StagedCommunicator>(mpi_->split_by_host(), device_, compute_));
}

void StagedCommunicator::record(CollectiveKind k, size_t count, size_t elem_bytes) {
  traffic_->record(k, ledger_full_bytes(k, count, elem_bytes, size()), size(), successor_in_other_group_);
}

StagedCommunicator::Staged StagedCommunicator::stage(size_t block_bytes, const void* device_src, size_t offset,
                                                     size_t bytes) {
  Staged s{Pool::lease(pool_, block_bytes)};
  DeviceGuard guard(device_);
  // The copy stream waits for the compute stream's work so far, also where nothing goes up (a
  // broadcast's receivers): the copy back in wait() must land after what that work does to the
  // destination.
  ZDP_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  ZDP_CUDA_CHECK(cudaStreamWaitEvent(pool_->copy, ready_, 0));
  if (bytes > 0) {
    ZDP_CUDA_CHECK(cudaMemcpyAsync(s.block.get() + offset, device_src, bytes, cudaMemcpyDeviceToHost, pool_->copy));
    ZDP_CUDA_CHECK(cudaStreamSynchronize(pool_->copy));  // MPI reads the block as soon as it is issued
  }
  return s;
}

WorkPtr StagedCommunicator::barrier_async() { return mpi_->barrier_async(); }

WorkPtr StagedCommunicator::broadcast_async(void* buf, size_t count, DType dtype, int root) {
  ZDP_CHECK(root >= 0 && root < size(), "broadcast from root {} in a group of {} ranks", root, size());
  record(CollectiveKind::kBroadcast, count, dtype_size(dtype));
  if (count == 0 || on_host("broadcast", {buf})) return mpi_->broadcast_async(buf, count, dtype, root);
  const size_t n = count * dtype_size(dtype);
  const bool root_here = rank() == root;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  Staged s = stage(n, buf, 0, root_here ? n : 0);
  WorkPtr mpi = mpi_->broadcast_async(s.block.get(), count, dtype, root);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, buf, s.block.get(), root_here ? 0 : n);
}

WorkPtr StagedCommunicator::broadcast_bytes_async(void* buf, size_t bytes, int root) {
  ZDP_CHECK(root >= 0 && root < size(), "broadcast from root {} in a group of {} ranks", root, size());
  record(CollectiveKind::kBroadcast, bytes, 1);
  if (bytes == 0 || on_host("broadcast_bytes", {buf})) return mpi_->broadcast_bytes_async(buf, bytes, root);
  const bool root_here = rank() == root;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  Staged s = stage(bytes, buf, 0, root_here ? bytes : 0);
  WorkPtr mpi = mpi_->broadcast_bytes_async(s.block.get(), bytes, root);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, buf, s.block.get(), root_here ? 0 : bytes);
}

WorkPtr StagedCommunicator::all_reduce_async(void* buf, size_t count, DType dtype, ReduceOp op) {
  record(CollectiveKind::kAllReduce, count, dtype_size(dtype));
  if (count == 0 || on_host("all_reduce", {buf})) return mpi_->all_reduce_async(buf, count, dtype, op);
  const size_t n = count * dtype_size(dtype);
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  Staged s = stage(n, buf, 0, n);
  WorkPtr mpi = mpi_->all_reduce_async(s.block.get(), count, dtype, op);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, buf, s.block.get(), n);
}

WorkPtr StagedCommunicator::reduce_scatter_async(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) {
  record(CollectiveKind::kReduceScatter, count, dtype_size(dtype));
  if (count == 0 || on_host("reduce_scatter", {send, recv}))
    return mpi_->reduce_scatter_async(send, recv, count, dtype, op);
  ZDP_CHECK(send != nullptr && recv != nullptr, "reduce_scatter of {} elements with a null buffer", count);
  const size_t chunk = count * dtype_size(dtype);
  const size_t mine = static_cast<size_t>(rank()) * chunk;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  // In place on the host whatever the device form: the rest of the block is staging.
  Staged s = stage(chunk * size(), send, 0, chunk * size());
  WorkPtr mpi = mpi_->reduce_scatter_async(s.block.get(), s.block.get() + mine, count, dtype, op);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, recv, s.block.get() + mine, chunk);
}

WorkPtr StagedCommunicator::all_gather_async(const void* send, void* recv, size_t count, DType dtype) {
  record(CollectiveKind::kAllGather, count, dtype_size(dtype));
  if (count == 0 || on_host("all_gather", {send, recv})) return mpi_->all_gather_async(send, recv, count, dtype);
  ZDP_CHECK(send != nullptr && recv != nullptr, "all_gather of {} elements with a null buffer", count);
  const size_t chunk = count * dtype_size(dtype);
  const size_t mine = static_cast<size_t>(rank()) * chunk;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  Staged s = stage(chunk * size(), send, mine, chunk);
  WorkPtr mpi = mpi_->all_gather_async(s.block.get() + mine, s.block.get(), count, dtype);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, recv, s.block.get(), chunk * size());
}

WorkPtr StagedCommunicator::all_gather_bytes_async(const void* send, void* recv, size_t bytes) {
  record(CollectiveKind::kAllGather, bytes, 1);
  if (bytes == 0 || on_host("all_gather_bytes", {send, recv})) return mpi_->all_gather_bytes_async(send, recv, bytes);
  ZDP_CHECK(send != nullptr && recv != nullptr, "all_gather of {} bytes with a null buffer", bytes);
  const size_t mine = static_cast<size_t>(rank()) * bytes;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  Staged s = stage(bytes * size(), send, mine, bytes);
  WorkPtr mpi = mpi_->all_gather_bytes_async(s.block.get() + mine, s.block.get(), bytes);
  return std::make_shared<StagedWork>(std::move(mpi), s.block, pool_, recv, s.block.get(), bytes * size());
}

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
