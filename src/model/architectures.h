// What each architecture gives the model seam (model.cpp's make_model and model_activation_parts):
// its model over a layout of its config, and the activation memory that model allocates. Only model/
// includes this; an architecture's class lives in its own .cpp (gpt2.cpp, llama.cpp), over
// Transformer (transformer.h).
#pragma once

#include <memory>

#include "device/device.h"
#include "model/batch.h"
#include "model/model.h"

namespace zerodp::model {

template <typename P>
struct Architecture {
  std::unique_ptr<Model<P>> (*make)(const ParamLayout& layout, int B, int T, ActivationSettings acts,
                                    device::Device& dev);
  // The `act` bytes its model allocates, by part, with kernels of these attention sizes.
  ActivationBytes (*activation_parts)(const ModelConfig& config, int B, int T, ActivationSettings acts,
                                      const device::AttentionSizes& sizes);
};

template <typename P>
Architecture<P> gpt2_architecture();
template <typename P>
Architecture<P> llama_architecture();

// The architecture whose model is M<P>, built as M<P>(layout, B, T, acts, dev), with
// activations Acts<P> laid out for the config (model.*config_of)().
template <typename P, template <typename> class M, template <typename> class Acts, auto config_of>
Architecture<P> architecture_of() {
  return {[](const ParamLayout& layout, int B, int T, ActivationSettings acts,
             device::Device& dev) -> std::unique_ptr<Model<P>> {
            return std::make_unique<M<P>>(layout, B, T, acts, dev);
          },
          [](const ModelConfig& config, int B, int T, ActivationSettings acts, const device::AttentionSizes& sizes) {
            return activation_bytes_of<Acts<P>>(B, T, (config.*config_of)(), acts, sizes);
          }};
}

// X(P) for every type a model computes in.
#define ZDP_FOR_EACH_MODEL_TYPE(X) X(float) X(double) X(bf16) X(fp16)

}  // namespace zerodp::model
