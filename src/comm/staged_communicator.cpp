#include "comm/staged_communicator.h"

#if ZERODP_WITH_CUDA

#include <algorithm>
#include <mutex>
#include <vector>


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

}  // namespace

std::unique_ptr<StagedCommunicator> StagedCommunicator::create(Communicator& group, int device,
                                                               cudaStream_t compute_stream) {
  auto c = std::make_unique<StagedCommunicator>(private_group(group, "StagedCommunicator"), device, compute_stream);
  follow(group, *c);
  return c;
}

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> mpi_group, int device, cudaStream_t compute_stream)
    : DeviceCommunicator(std::move(mpi_group), device, "StagedCommunicator"), compute_(compute_stream) {
  pool_ = std::make_shared<Pool>(device);
  DeviceGuard guard(device_);
  ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

StagedCommunicator::~StagedCommunicator() {
  if (ready_ != nullptr) (void)cudaEventDestroy(ready_);
}

std::unique_ptr<Communicator> StagedCommunicator::make_child(std::unique_ptr<Communicator> mpi_group) {
  return std::make_unique<StagedCommunicator>(std::move(mpi_group), device_, compute_);
}

std::shared_ptr<char> StagedCommunicator::stage(size_t block_bytes, const void* device_src, size_t offset,
                                                size_t bytes) {
  std::shared_ptr<char> block = Pool::lease(pool_, block_bytes);
  DeviceGuard guard(device_);
  // The copy stream waits for the compute stream's work so far, also where nothing goes up (a
  // broadcast's receivers): the copy back in wait() must land after what that work does to the
  // destination.
  ZDP_CUDA_CHECK(cudaEventRecord(ready_, compute_));
  ZDP_CUDA_CHECK(cudaStreamWaitEvent(pool_->copy, ready_, 0));
  if (bytes > 0) {
    ZDP_CUDA_CHECK(cudaMemcpyAsync(block.get() + offset, device_src, bytes, cudaMemcpyDeviceToHost, pool_->copy));
    ZDP_CUDA_CHECK(cudaStreamSynchronize(pool_->copy));  // MPI reads the block as soon as it is issued
  }
  return block;
}

WorkPtr StagedCommunicator::start_barrier() { return mpi_->barrier_async(); }

// The same collective on a pinned block, in place on the host whatever the device form (the rest of
// the block is staging), and what wait() copies back to the device.
WorkPtr StagedCommunicator::start(const Collective& c) {
  if (c.count == 0) return start_on(*mpi_, c);
  const size_t chunk = c.chunk_bytes(), all = chunk * static_cast<size_t>(size());
  const size_t mine = static_cast<size_t>(rank()) * chunk;
  std::lock_guard<std::mutex> lock(pool_->issue_mu);
  std::shared_ptr<char> block;
  Collective host = c;
  size_t result_offset = 0, result_bytes = chunk;
  switch (c.kind) {
    case CollectiveKind::kBroadcast: {
      const bool root_here = rank() == c.root;
      block = stage(chunk, c.recv, 0, root_here ? chunk : 0);
      host.recv = block.get();
      result_bytes = root_here ? 0 : chunk;
      break;
    }
    case CollectiveKind::kAllReduce:
      block = stage(chunk, c.recv, 0, chunk);
      host.recv = block.get();
      break;
    case CollectiveKind::kReduceScatter:
      block = stage(all, c.send, 0, all);
      host.send = block.get();
      host.recv = block.get() + mine;
      host.in_place = true;
      result_offset = mine;
      break;
    case CollectiveKind::kAllGather:
      block = stage(all, c.send, mine, chunk);
      host.send = block.get() + mine;
      host.recv = block.get();
      host.in_place = true;
      result_bytes = all;
      break;
  }
  WorkPtr mpi = start_on(*mpi_, host);
  return std::make_shared<StagedWork>(std::move(mpi), block, pool_, c.recv, block.get() + result_offset, result_bytes);
}

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
