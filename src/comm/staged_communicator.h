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
// ledger counts them (comm, host tier). Host buffers go straight to MPI (comm/device_communicator.h).
// Timeouts are the MPI watchdog's.
#pragma once

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "comm/device_communicator.h"

namespace zerodp::comm {

class StagedCommunicator final : public DeviceCommunicator {
 public:
  // Collective over `group` (a private split of it carries the collectives); inherits its ledger and timeout.
  static std::unique_ptr<StagedCommunicator> create(Communicator& group, int device, cudaStream_t compute_stream = nullptr);
  StagedCommunicator(std::unique_ptr<Communicator> mpi_group, int device, cudaStream_t compute_stream);
  ~StagedCommunicator() override;
  StagedCommunicator(const StagedCommunicator&) = delete;
  StagedCommunicator& operator=(const StagedCommunicator&) = delete;

  std::string backend() const override { return "staged"; }
  void set_compute_stream(cudaStream_t stream) { compute_ = stream; }

  class Pool;  // the pinned blocks

 protected:
  WorkPtr start(const Collective& c) override;
  WorkPtr start_barrier() override;
  std::unique_ptr<Communicator> make_child(std::unique_ptr<Communicator> mpi_group) override;

 private:
  // Copies `bytes` at `device_src` into a pinned block of `block_bytes` at `offset` (after the
  // compute stream's work); returns the block.
  std::shared_ptr<char> stage(size_t block_bytes, const void* device_src, size_t offset, size_t bytes);

  cudaStream_t compute_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::shared_ptr<Pool> pool_;
};

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
