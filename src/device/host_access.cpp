#include "device/host_access.h"

#include <cstring>

namespace zerodp::device {

Buffer allocate_host_visible(Device& dev, size_t bytes, MemCategory category) {
  return dev.host_addressable() ? dev.allocate(bytes, category) : dev.allocate_host(bytes, category);
}

void copy_from_host(Device& dev, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dev.host_addressable()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  dev.copy(dst, src, bytes);
  // A copy from page-locked memory is still reading it when copy() returns: the caller may reuse
  // `src` at once, so wait for it (these are loading and checkpoint paths, not the step's).
  dev.synchronize();
}

HostRead::HostRead(Device& dev, const void* src, size_t bytes, MemCategory category) : ptr_(src) {
  if (dev.host_addressable() || bytes == 0) return;
  staging_ = dev.allocate_host(bytes, category);
  dev.copy(staging_.data(), src, bytes);  // a host destination: copy() waits for it
  ptr_ = staging_.data();
}

HostRead HostRead::widened(Device& dev, const void* src, DType type, size_t n, MemCategory category) {
  if (type == DType::kF32) return HostRead(dev, src, n * sizeof(float), category);
  HostRead r;
  r.staging_ = allocate_host_visible(dev, n * sizeof(float), category);
  copy_widened_to_host(dev, r.staging_.as<float>(), src, type, n);
  r.ptr_ = r.staging_.data();
  return r;
}

void copy_widened_to_host(Device& dev, float* dst, const void* src, DType type, size_t n) {
  if (n == 0) return;
  if (dev.host_addressable()) {
    dev.convert(src, type, dst, DType::kF32, n);
    return;
  }
  if (type == DType::kF32) {
    dev.copy(dst, src, n * sizeof(float));  // a host destination: copy() waits for it
    return;
  }
  Buffer wide = dev.allocate(n * sizeof(float), MemCategory::kGathered);
  dev.convert(src, type, wide.data(), DType::kF32, n);
  dev.copy(dst, wide.data(), n * sizeof(float));
}

}  // namespace zerodp::device
