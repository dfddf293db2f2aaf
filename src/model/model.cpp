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

size_t model_activation_bytes(const ModelConfig& config, int B, int T, bool checkpointing, DType compute) {
  return config.is_gpt2() ? activation_bytes(config.gpt2(), B, T, checkpointing, compute)
                          : llama_activation_bytes(config.llama(), B, T, checkpointing, compute);
}

template std::unique_ptr<Model<float>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<double>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<bf16>> make_model(const ParamLayout&, int, int, bool, device::Device&);
template std::unique_ptr<Model<fp16>> make_model(const ParamLayout&, int, int, bool, device::Device&);

}  // namespace zerodp::model
