// What the GPU tests compare through: a host array and its copy on the CUDA device.
#pragma once

#include <cstddef>
#include <vector>

#include "device/cuda_device.h"

namespace zerodp::device::test_support {

// host fills the inputs and holds the CPU device's results; upload() and download() cross the bus.
template <class E>
struct Twin {
  std::vector<E> host;
  Buffer dev;
  Twin(CudaDevice& d, size_t n) : host(n), dev(d.allocate(n * sizeof(E), MemCategory::kAct)) {}
  E* h() { return host.data(); }
  E* d() { return dev.as<E>(); }
  void upload(CudaDevice& d) { d.copy(dev.data(), host.data(), host.size() * sizeof(E)); }
  std::vector<E> download(CudaDevice& d) {
    std::vector<E> out(host.size());
    d.copy(out.data(), dev.data(), out.size() * sizeof(E));
    return out;
  }
};

}  // namespace zerodp::device::test_support
