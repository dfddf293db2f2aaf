#include "comm/device_communicator.h"

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>

#include "core/error.h"

namespace zerodp::comm {

bool is_device_pointer(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error a plain host pointer may leave
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

DeviceCommunicator::DeviceCommunicator(std::unique_ptr<Communicator> mpi_group, int device, const char* backend)
    : mpi_(std::move(mpi_group)), device_(device) {
  ZDP_CHECK(mpi_ != nullptr, "{} needs an MPI group", backend);
  mpi_->set_traffic_ledger(&untracked_);
}

std::unique_ptr<Communicator> DeviceCommunicator::private_group(Communicator& group, const char* backend) {
  std::unique_ptr<Communicator> own = group.split(0, group.rank());
  ZDP_CHECK(own != nullptr, "{}: the private split of the group failed", backend);
  return own;
}

void DeviceCommunicator::follow(Communicator& group, Communicator& made) {
  made.set_traffic_ledger(&group.traffic());
  made.set_successor_in_other_group(group.successor_in_other_group());
  made.set_timeout(group.timeout());
}

void DeviceCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  mpi_->set_timeout(seconds);
}

std::unique_ptr<Communicator> DeviceCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> sub = mpi_->split(color, key);
  if (sub == nullptr) return nullptr;
  return inherit(make_child(std::move(sub)));
}

std::unique_ptr<Communicator> DeviceCommunicator::split_by_host() { return inherit(make_child(mpi_->split_by_host())); }

}  // namespace zerodp::comm

#endif  // ZERODP_WITH_CUDA
