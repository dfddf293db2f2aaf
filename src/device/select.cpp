#include "device/select.h"

#include <charconv>

#include <fmt/format.h>

#include "core/error.h"
#include "device/cuda_device.h"
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
#else
  throw UsageError(fmt::format("--device {}: this zerodp was built without CUDA (ZERODP_CUDA=OFF, or no nvcc "
                               "when it was configured); train with --device cpu",
                               name));
#endif
}

bool supports(const DeviceSpec& spec, DType compute) {
  return spec.kind == DeviceSpec::Kind::kCpu || cuda_device_supports(compute);
}

GpuChoice choose_gpu(const DeviceSpec& spec, int local_rank) {
  require_trainable(spec);
  ZDP_REQUIRE(spec.kind == DeviceSpec::Kind::kCuda, "choose_gpu: --device {} is not a GPU", device_spec_name(spec));
#if ZERODP_WITH_CUDA
  const cuda::RuntimeInfo info = cuda::query_runtime();
  const int count = static_cast<int>(info.gpus.size());
  GpuChoice c;
  c.ordinal = spec.ordinal >= 0 ? spec.ordinal : (local_rank < 0 ? 0 : local_rank % count);
  const cuda::GpuInfo& gpu = info.gpus[static_cast<size_t>(c.ordinal)];
  c.name = gpu.name;
  c.memory_bytes = gpu.total_memory;
  return c;
#else
  (void)local_rank;
  return {};  // not reached: require_trainable threw
#endif
}

}  // namespace zerodp::device
