#include "device/device.h"

#include <string>

#include "core/error.h"

namespace zerodp::device {

bool Device::supports(DType compute) const {
  switch (compute) {
    case DType::kF32: return kernels_f32() != nullptr;
    case DType::kBF16: return kernels_bf16() != nullptr;
    case DType::kF16: return kernels_fp16() != nullptr;
    default: return false;
  }
}

void Device::sum_squares_each(std::span<const SquaresSpan> spans, double* out) {
  for (size_t i = 0; i < spans.size(); ++i) out[i] = sum_squares(spans[i].x, spans[i].type, spans[i].n);
}

void Device::no_kernels(DType compute) const {
  std::string have;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    if (supports(t)) have += (have.empty() ? "" : " or ") + std::string(dtype_name(t));
  throw RuntimeFailure(fmt::format("the {} device has no kernels computing in {}{}", name(), dtype_name(compute),
                                   have.empty() ? std::string() : fmt::format(": use --dtype {}", have)));
}

namespace {
class FlashAttentionSizes final : public AttentionSizes {
 public:
  size_t attention_scratch_bytes(const kernels::AttentionShape& s) const override { return row_floats(s); }
  size_t attention_saved_bytes(const kernels::AttentionShape& s) const override { return row_floats(s); }

 private:
  // One fp32 per (sequence, query head, position).
  static size_t row_floats(const kernels::AttentionShape& s) {
    return static_cast<size_t>(s.B) * s.heads * s.T * sizeof(float);
  }
};
}  // namespace

const AttentionSizes& flash_attention_sizes() {
  static const FlashAttentionSizes sizes;
  return sizes;
}

const AttentionSizes& attention_sizes(bool gpu, DType compute) {
  if (gpu) return flash_attention_sizes();
  const Device& cpu = default_device();
  switch (compute) {
    case DType::kBF16: return cpu.kernels<bf16>();
    case DType::kF16: return cpu.kernels<fp16>();
    default: return cpu.kernels<float>();
  }
}

}  // namespace zerodp::device
