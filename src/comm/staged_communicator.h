// Host staging: Communicator on device buffers over an MPI group, for ranks that share a GPU (NCCL
// refuses two ranks of one communicator on one device, so W=2 on a one-GPU machine comes here; see
// make_gpu_communicator in comm/nccl_communicator.h). Only built with the CUDA layer.
//
// Each collective copies its device input to a pinned host block (D2H on the communicator's copy
// stream, after the compute stream's work so far), runs the MPI backend's collective on the block
// (so the sums are the MPI backend's ordered ones, the same bits as NCCL's path), and wait() copies
// the result back (H2D) before returning. Issuing blocks the host until the compute stream has
// reached the issue point and the copy is done (the copy must be complete before MPI reads the
// block); the MPI part then overlaps whatever the caller does next. wait() blocks the host until the
// result is back in device memory, so anything enqueued afterwards, on any stream, sees it.
// is_completed() says the MPI part is done; the copy back still happens in wait().
//
// Pinned blocks are sized on demand and kept for reuse (one per collective in flight); the memory
// ledger counts them (comm, host tier). Host buffers go straight to MPI. Traffic is recorded as by the MPI backend
// (the private MPI group records into a ledger of its own). Timeouts are the MPI watchdog's.
#pragma once

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/traffic.h"

namespace zerodp::comm {

class StagedCommunicator final : public Communicator {
 public:
  // Collective over `group` (a private split of it carries the collectives); inherits its ledger and timeout.
  static std::unique_ptr<StagedCommunicator> create(Communicator& group, int device, cudaStream_t compute_stream = nullptr);
  StagedCommunicator(std::unique_ptr<Communicator> mpi_group, int device, cudaStream_t compute_stream);
  ~StagedCommunicator() override;
  StagedCommunicator(const StagedCommunicator&) = delete;
  StagedCommunicator& operator=(const StagedCommunicator&) = delete;

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  std::string backend() const override { return "staged"; }
  int device() const { return device_; }
  void set_compute_stream(cudaStream_t stream) { compute_ = stream; }

  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<Communicator> split_by_host() override;

  WorkPtr barrier_async() override;
  WorkPtr broadcast_async(void* buf, size_t count, DType dtype, int root) override;
  WorkPtr all_reduce_async(void* buf, size_t count, DType dtype, ReduceOp op) override;
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  WorkPtr all_gather_async(const void* send, void* recv, size_t count, DType dtype) override;
  WorkPtr broadcast_bytes_async(void* buf, size_t bytes, int root) override;
  WorkPtr all_gather_bytes_async(const void* send, void* recv, size_t bytes) override;

  void set_timeout(double seconds) override;

  class Pool;  // the pinned blocks

 private:
  void record(CollectiveKind k, size_t count, size_t elem_bytes);
  // Copies `bytes` at `device_src` into a new pinned block at `offset` (after the compute stream's work).
  struct Staged;
  Staged stage(size_t block_bytes, const void* device_src, size_t offset, size_t bytes);

  TrafficLedger untracked_;            // the private MPI group records here; we record in traffic()
  std::unique_ptr<Communicator> mpi_;  // the private MPI group
  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::shared_ptr<Pool> pool_;
};

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
