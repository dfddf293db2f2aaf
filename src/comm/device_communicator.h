// What the GPU backends (comm/nccl_communicator.h, comm/staged_communicator.h) share: a private MPI
// group (a split of the group they were made over) that carries their setup, their splits and
// every collective on host buffers; the CUDA device they run on. Only built with the CUDA layer.
//
// Host buffers: a collective whose buffers are all host memory (counters, checksums, text) runs on
// the private MPI group, so that code written for the CPU keeps working; mixing host and device
// buffers in one collective is an error (the front half of comm/communicator.h routes and checks).
// The private group records into a ledger of its own: the front half has recorded the collective in
// traffic() already, with the MPI backend's bytes, so the planner's numbers hold on GPU.
#pragma once

#if ZERODP_WITH_CUDA

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/traffic.h"

namespace zerodp::comm {

// Whether `p` is memory a kernel can read (device or managed) rather than host memory; null is host.
bool is_device_pointer(const void* p);

class DeviceCommunicator : public Communicator {
 public:
  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  int device() const { return device_; }

  // A split of the private MPI group, then a new communicator of this backend over it; nullptr for a
  // negative color. The children inherit the ledger, the timeout and the streams.
  std::unique_ptr<Communicator> split(int color, int key) override;
  std::unique_ptr<Communicator> split_by_host() override;
  void set_timeout(double seconds) override;

 protected:
  // Takes ownership of `mpi_group` (used only by this communicator from now on); `backend` names it
  // in errors.
  DeviceCommunicator(std::unique_ptr<Communicator> mpi_group, int device, const char* backend);

  // The private MPI group of a communicator made over `group`: a split of it (collective).
  static std::unique_ptr<Communicator> private_group(Communicator& group, const char* backend);
  // What a communicator made over `group` takes from it: the ledger, the ring successor's group, the timeout.
  static void follow(Communicator& group, Communicator& made);

  // A communicator of this backend over `mpi_group`, with this one's device and streams.
  virtual std::unique_ptr<Communicator> make_child(std::unique_ptr<Communicator> mpi_group) = 0;

  Communicator* host_group() override { return mpi_.get(); }
  bool is_device_memory(const void* p) const override { return is_device_pointer(p); }

  TrafficLedger untracked_;            // the private MPI group's own collectives (setup) record here
  std::unique_ptr<Communicator> mpi_;  // the private MPI group
  int device_ = 0;
};

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
