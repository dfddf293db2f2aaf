#include "model/model.h"

#include "model/architectures.h"

namespace zerodp::model {

namespace {
template <typename P>
Architecture<P> architecture(const ModelConfig& config) {
  return config.is_llama() ? llama_architecture<P>() : gpt2_architecture<P>();
}

template <typename P>
ActivationBytes parts_in(const ModelConfig& config, int B, int T, ActivationSettings acts,
                         const device::AttentionSizes& sizes) {
  return architecture<P>(config).activation_parts(config, B, T, acts, sizes);
}
}  // namespace

template <typename P>
std::unique_ptr<Model<P>> make_model(const ParamLayout& layout, int B, int T, ActivationSettings acts,
                                     device::Device& dev) {
  return architecture<P>(layout.config()).make(layout, B, T, acts, dev);
}

ActivationBytes model_activation_parts(const ModelConfig& config, int B, int T, ActivationSettings acts, DType compute,
                                       const device::AttentionSizes& sizes) {
  switch (compute) {
    case DType::kBF16: return parts_in<bf16>(config, B, T, acts, sizes);
    case DType::kF16: return parts_in<fp16>(config, B, T, acts, sizes);
    default: return parts_in<float>(config, B, T, acts, sizes);
  }
}

size_t model_activation_bytes(const ModelConfig& config, int B, int T, ActivationSettings acts, DType compute) {
  return model_activation_parts(config, B, T, acts, compute, device::attention_sizes(false, compute)).total();
}

template std::unique_ptr<Model<float>> make_model(const ParamLayout&, int, int, ActivationSettings, device::Device&);
template std::unique_ptr<Model<double>> make_model(const ParamLayout&, int, int, ActivationSettings, device::Device&);
template std::unique_ptr<Model<bf16>> make_model(const ParamLayout&, int, int, ActivationSettings, device::Device&);
template std::unique_ptr<Model<fp16>> make_model(const ParamLayout&, int, int, ActivationSettings, device::Device&);

}  // namespace zerodp::model
