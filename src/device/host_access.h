// Host access to a device's memory, for the code that runs on the host: loading weights and
// optimizer states, checkpoints, consolidation, the batch's tokens. On a device the host addresses
// (Device::host_addressable: the CPU) it is the device's bytes themselves and nothing moves: no copy,
// and nothing more in the ledger; on a GPU it is page-locked host buffers (the ledger's host tier) and
// copies that have finished when the call returns.
#pragma once

#include <cstddef>

#include "core/memory.h"
#include "device/device.h"

namespace zerodp::device {

// A buffer the host fills or reads: the device's memory where the host addresses it, its
// page-locked host memory otherwise.
Buffer allocate_host_visible(Device& dev, size_t bytes, MemCategory category);

// Copies `bytes` from host memory into device memory (or host memory) and returns when `src` may
// be written again. On a host-addressable device, a memcpy.
void copy_from_host(Device& dev, void* dst, const void* src, size_t bytes);

// `bytes` at `src` (the device's memory), readable by the host while this lives: `src` itself on a
// host-addressable device, a host copy otherwise (category `category`).
class HostRead {
 public:
  HostRead(Device& dev, const void* src, size_t bytes, MemCategory category);
  const void* data() const { return ptr_; }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(ptr_);
  }

  // n values of `type` at `src` (the device's memory) as fp32, readable by the host while this lives:
  // `src` itself where it is fp32 on a host-addressable device, else a widened copy (`category`).
  static HostRead widened(Device& dev, const void* src, DType type, size_t n, MemCategory category);

 private:
  HostRead() = default;
  Buffer staging_;
  const void* ptr_ = nullptr;
};

// Writes n values of `type` at `src` (the device's memory) as fp32 into host memory `dst`; returns when
// they are there.
void copy_widened_to_host(Device& dev, float* dst, const void* src, DType type, size_t n);

}  // namespace zerodp::device
