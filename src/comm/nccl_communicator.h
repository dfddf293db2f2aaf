// The NCCL backend of Communicator: collectives on device buffers, for one rank per GPU.
// make_gpu_communicator() picks it, or host staging through MPI (comm/staged_communicator.h) when
// ranks share a GPU. Only built with the CUDA layer (ZERODP_WITH_CUDA).
//
// Ordering (c10d's ProcessGroupNCCL model). The communicator has its own non-blocking stream and
// follows a compute stream (set_compute_stream, default the legacy default stream 0). Issuing a
// collective records an event on the compute stream and makes the communication stream wait for it,
// so the collective sees everything enqueued on the compute stream before the call, and the compute
// kernels enqueued after it run alongside. Work::wait() makes the compute stream wait for an event
// recorded after the collective (the host does not block), so what the caller enqueues after wait()
// sees the result; with a timeout set (or host_wait) wait() also blocks the host until the collective
// is done, polling so that a hang becomes an error. is_completed() asks the event. Barriers always
// block the host. Collectives run on the GPU in issue order, the same on every rank.
//
// Determinism (the sums of comm/communicator.h). NCCL's reductions add in an order of their own,
// so sums and averages do not use them: reduce_scatter is an all-to-all of chunks (grouped
// ncclSend/ncclRecv, every rank's values of chunk r land side by side on rank r) followed by
// cuda::ordered_reduce, which adds the W values in rank order in fp32 and rounds once; all_reduce is
// that over W chunks of ceil(count/W) followed by ncclAllGather. The bits equal the MPI backend's.
// kMax goes the same way. Broadcasts and all-gathers move bytes (ncclUint8), which is exact.
//
// Memory: the all-to-all receives into device scratch of W chunks (2·W for an all-reduce whose
// count W does not divide), grown on demand with cudaMallocAsync on the communication stream and
// kept; the memory ledger counts it (comm, device tier) while it is held.
//
// Host buffers go through the private MPI group (comm/device_communicator.h).
//
// Errors: NCCL and CUDA failures throw RuntimeFailure naming the call and the collective. A wait
// that passes its deadline aborts the NCCL communicator (ncclCommAbort) and throws; afterwards every
// collective throws that first error (the ranks no longer agree on what has run).
#pragma once

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "comm/device_communicator.h"

namespace zerodp::comm {

struct NcclOptions {
  cudaStream_t compute_stream = nullptr;  // the stream collectives follow and wait() orders (0: legacy default)
  bool host_wait = false;                 // wait() also blocks the host until the collective is done
};

class NcclCommunicator final : public DeviceCommunicator {
 public:
  // Collective over `group`: a private MPI split of it carries the unique id (broadcast from rank 0),
  // host payloads and later splits; the NCCL communicator runs on CUDA device `device`. Inherits the
  // group's traffic ledger and timeout.
  static std::unique_ptr<NcclCommunicator> create(Communicator& group, int device, const NcclOptions& options = {});
  // Takes ownership of `mpi_group` (used only by this communicator from now on).
  NcclCommunicator(std::unique_ptr<Communicator> mpi_group, int device, const NcclOptions& options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string backend() const override { return "nccl"; }
  cudaStream_t comm_stream() const { return stream_; }
  cudaStream_t compute_stream() const { return options_.compute_stream; }
  // Collectives issued from now on follow `stream` (see the ordering above).
  void set_compute_stream(cudaStream_t stream);

  struct State;  // shared with the Work handles (the NCCL communicator, its failure)

 protected:
  WorkPtr start(const Collective& c) override;
  WorkPtr start_barrier() override;
  std::unique_ptr<Communicator> make_child(std::unique_ptr<Communicator> mpi_group) override;

 private:
  void release() noexcept;
  template <class Enqueue>
  WorkPtr issue(const std::string& what, bool host_blocking, Enqueue&& enqueue);
  void ensure_scratch(size_t bytes);
  // An ordered reduction of `count` elements: reduce_scatter when `send` != nullptr, else all_reduce of buf.
  void enqueue_ordered(const void* send, void* buf, size_t count, DType dtype, ReduceOp op);

  NcclOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;         // recorded on the compute stream at each issue
  void* scratch_ = nullptr;             // the all-to-all's receive slots (stream-ordered allocation)
  size_t scratch_bytes_ = 0;
  void* barrier_word_ = nullptr;        // one int for the barrier's all-reduce
  std::shared_ptr<State> state_;
};

// A communicator for device buffers over `mpi_group` (collective; `device` is this rank's CUDA
// ordinal): NCCL when every rank of the group has a GPU of its own, else host staging through MPI,
// since NCCL refuses two ranks of one communicator on the same device (a one-GPU machine running W=2).
// The ranks' (host, GPU UUID) pairs are all-gathered over MPI (untracked traffic).
// ZERODP_GPU_COMM=staged forces staging (all ranks must agree); nccl or auto lets it choose.
std::unique_ptr<Communicator> make_gpu_communicator(Communicator& mpi_group, int device,
                                                    cudaStream_t compute_stream = nullptr);

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
