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
// Determinism (the contract of comm/communicator.h). NCCL's reductions add in an order of their own,
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
// Host buffers: collectives on host memory (counters, checksums, text) go through the MPI group the
// communicator was made from, so code written for the CPU keeps working; mixing host and device
// buffers in one collective is an error. Every collective records the MPI backend's bytes in the
// traffic ledger (gpu_comm_plan.h's ledger_full_bytes).
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

#include "comm/communicator.h"
#include "comm/traffic.h"

namespace zerodp::comm {

struct NcclOptions {
  cudaStream_t compute_stream = nullptr;  // the stream collectives follow and wait() orders (0: legacy default)
  bool host_wait = false;                 // wait() also blocks the host until the collective is done
};

// Whether `p` is memory a kernel can read (device or managed) rather than host memory; null is host.
bool is_device_pointer(const void* p);

class NcclCommunicator final : public Communicator {
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

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  int device() const { return device_; }
  cudaStream_t comm_stream() const { return stream_; }
  cudaStream_t compute_stream() const { return options_.compute_stream; }
  // Collectives issued from now on follow `stream` (see the ordering above).
  void set_compute_stream(cudaStream_t stream);

  // MPI split of the private group, then a new NCCL communicator over it (a new unique id); nullptr
  // for a negative color. The children inherit ledger, timeout and compute stream.
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

  struct State;  // shared with the Work handles (the NCCL communicator, its failure)

 private:
  void release() noexcept;
  template <class Enqueue>
  WorkPtr issue(const std::string& what, bool host_blocking, Enqueue&& enqueue);
  void ensure_scratch(size_t bytes);
  void record(CollectiveKind k, size_t count, size_t elem_bytes);
  // An ordered reduction of `count` elements: reduce_scatter when `send` != nullptr, else all_reduce of buf.
  void enqueue_ordered(const void* send, void* buf, size_t count, DType dtype, ReduceOp op);
  template <class OnHost>
  WorkPtr all_gather_bytes_checked(const char* kind, const void* send, void* recv, size_t count, size_t elem_bytes,
                                   const char* unit, OnHost&& on_host_path);

  TrafficLedger untracked_;             // the private MPI group records here; we record in traffic()
  std::unique_ptr<Communicator> mpi_;   // the private MPI group
  NcclOptions options_;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
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
