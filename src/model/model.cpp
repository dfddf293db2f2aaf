#include "model/model.h"

#include "model/gpt2.h"
#include "model/llama.h"

namespace zerodp::model {

template <typename P>
std::unique_ptr<Model<P>> make_model(const ParamLayout& layout, int B, int T, bool checkpointing,
                                     device::Device& dev) {
  if (layout.config().is_llama()) return std::make_unique<Llama<P>>(layout, B, T, checkpointing, dev);
  return std::make_unique<GPT2<P>>(layout, B, T, checkpointing, dev);
}

namespace {
template <typename P>
ActivationBytes parts_in(const ModelConfig& config, int B, int T, bool checkpointing,
                         const device::AttentionSizes& sizes) {
  return config.is_gpt2() ? gpt2_activation_parts<P>(config.gpt2(), B, T, checkpointing, sizes)
                          : llama_activation_parts<P>(config.llama(), B, T, checkpointing, sizes);
}
}  // namespace

ActivationBytes model_activation_parts(const ModelConfig& config, int B, int T, bool checkpointing, DType compute,
                                       const device::AttentionSizes& sizes) {
  switch (compute) {
    case DType::kBF16: return parts_in<bf16>(config, B, T, checkpointing, sizes);
    case DType::kF16: return parts_in<fp16>(config, B, T, checkpointing, sizes);
    default: return parts_in<float>(config, B, T, checkpointing, sizes);
  }
}

size_t model_activation_bytes(const ModelConfig& config, int B, int T, bool checkpointing, DType compute) {
  return model_activation_parts(config, B, T, checkpointing, compute, device::attention_sizes(false, compute)).total();
}

template std::unique_ptr<Model<float>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<double>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<bf16>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<fp16>> make_model(const ParamLayout&, int, int, bool, device::Device&);

}  // namespace zerodp::model
