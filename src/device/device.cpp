#include "device/device.h"

#include <string>
#include <string_view>

#include "core/error.h"

namespace zerodp::device {

bool Device::supports(DType compute) const {
  switch (compute) {
    case DType::kF32: return gpt2_f32() != nullptr;
    case DType::kBF16: return gpt2_bf16() != nullptr;
    case DType::kF16: return gpt2_fp16() != nullptr;
    default: return false;
  }
}

bool Device::supports_llama(DType compute) const {
  switch (compute) {
    case DType::kF32: return llama_f32() != nullptr;
    case DType::kBF16: return llama_bf16() != nullptr;
    case DType::kF16: return llama_fp16() != nullptr;
    default: return false;
  }
}

void Device::no_kernels(const char* family, DType compute) const {
  const bool llama = std::string_view(family) != "GPT-2";
  std::string have;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    if (llama ? supports_llama(t) : supports(t)) have += (have.empty() ? "" : " or ") + std::string(dtype_name(t));
  throw RuntimeFailure(fmt::format("the {} device has no {} kernels computing in {}{}", name(), family,
                                   dtype_name(compute),
                                   have.empty() ? std::string() : fmt::format(": use --dtype {}", have)));
}

}  // namespace zerodp::device
