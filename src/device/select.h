// Which device a run computes on (--device): "cpu", or "cuda" / "cuda:N" for a GPU. A request that
// cannot be served is a usage error (exit 2) that says why, before anything is allocated or
// communicated: a build without CUDA, no GPU visible (with the runtime's reason), an ordinal beyond
// the visible GPUs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace zerodp::device {

struct DeviceSpec {
  enum class Kind { kCpu, kCuda } kind = Kind::kCpu;
  int ordinal = -1;  // cuda:N; -1: the rank's own (local rank modulo the GPUs visible)
};

// "cpu", "cuda", "cuda:N". Throws UsageError naming `flag` on anything else.
DeviceSpec parse_device_spec(std::string_view text, std::string_view flag = "--device");
std::string device_spec_name(const DeviceSpec& spec);

// Throws UsageError unless this process can train on `spec`.
void require_trainable(const DeviceSpec& spec);

// Whether the device `spec` names computes the models in `compute` (Device::supports of the device it
// opens), answered before it is opened and in a build without CUDA alike.
bool supports(const DeviceSpec& spec, DType compute);

// The GPU a rank of a `spec` run computes on: cuda:N → GPU N; cuda → its local rank (its place
// among the ranks of its host) modulo the GPUs visible, so that a host's ranks spread over its GPUs
// and share them round-robin when there are more ranks than GPUs. Throws as require_trainable does.
struct GpuChoice {
  int ordinal = 0;
  std::string name;           // "NVIDIA H200"
  uint64_t memory_bytes = 0;  // its total memory
};
GpuChoice choose_gpu(const DeviceSpec& spec, int local_rank);

}  // namespace zerodp::device
