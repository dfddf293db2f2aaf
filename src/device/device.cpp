#include "device/device.h"

#include "core/error.h"

namespace zerodp::device {

bool Device::supports_llama(DType compute) const {
  switch (compute) {
    case DType::kF32: return llama_f32() != nullptr;
    case DType::kBF16: return llama_bf16() != nullptr;
    case DType::kF16: return llama_fp16() != nullptr;
    default: return false;
  }
}

void Device::no_llama_kernels(DType compute) const {
  throw RuntimeFailure(
      fmt::format("the {} device has no Llama-family kernels computing in {}", name(), dtype_name(compute)));
}

}  // namespace zerodp::device
