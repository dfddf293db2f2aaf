#include "device/select.h"

#include <charconv>

#include <fmt/format.h>

#include "core/error.h"
#if ZERODP_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace zerodp::device {

DeviceSpec parse_device_spec(std::string_view text, std::string_view flag) {
  if (text == "cpu") return {DeviceSpec::Kind::kCpu, -1};
  if (text == "cuda") return {DeviceSpec::Kind::kCuda, -1};
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ordinal);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && ordinal >= 0 &&
        ordinal < 1024)
      return {DeviceSpec::Kind::kCuda, ordinal};
  }
  const std::string_view shown = text.substr(0, 40);
  throw UsageError(fmt::format("{}: expected cpu, cuda or cuda:N (N a GPU ordinal), got '{}'{}", flag, shown,
                               shown.size() < text.size() ? "..." : ""));
}

std::string device_spec_name(const DeviceSpec& spec) {
  if (spec.kind == DeviceSpec::Kind::kCpu) return "cpu";
  return spec.ordinal < 0 ? "cuda" : fmt::format("cuda:{}", spec.ordinal);
}

void require_trainable(const DeviceSpec& spec) {
  if (spec.kind == DeviceSpec::Kind::kCpu) return;
  const std::string name = device_spec_name(spec);
#if ZERODP_WITH_CUDA
  const cuda::RuntimeInfo info = cuda::query_runtime();
  if (info.gpus.empty())
    throw UsageError(fmt::format("--device {}: no GPU is visible to this process ({}); train with --device cpu",
                                 name, info.why_none));
  if (spec.ordinal >= static_cast<int>(info.gpus.size()))
    throw UsageError(fmt::format("--device {}: only {} GPU{} visible (ordinals 0-{})", name, info.gpus.size(),
                                 info.gpus.size() == 1 ? " is" : "s are", info.gpus.size() - 1));
  // The kernels, GEMMs and NCCL communicator are built and tested (ctest -L gpu), but the engine
  // does not run its steps on them yet: say so rather than train on the CPU behind the user's back.
  const cuda::GpuInfo& gpu = info.gpus[spec.ordinal < 0 ? 0 : spec.ordinal];
  throw UsageError(fmt::format("--device {}: {} is visible, but this version of zerodp trains on the CPU only "
                               "(its GPU kernels and communicator are built, not yet wired into the engine); "
                               "train with --device cpu",
                               name, gpu.name));
#else
  throw UsageError(fmt::format("--device {}: this zerodp was built without CUDA (ZERODP_CUDA=OFF, or no nvcc "
                               "when it was configured); train with --device cpu",
                               name));
#endif
}

}  // namespace zerodp::device
