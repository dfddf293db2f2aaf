#include "plan/activations.h"

#include <limits>

#include "core/error.h"
#include "device/device.h"

namespace zerodp::plan {

model::ActivationBytes activation_bytes(const model::ModelConfig& config, int64_t B, int64_t T,
                                        model::ActivationSettings acts, DType compute, bool gpu) {
  constexpr int64_t kMaxTokens = std::numeric_limits<int>::max();
  ZDP_REQUIRE(B >= 1 && T >= 1 && B <= kMaxTokens / T,
              "a micro-batch of {} sequences of {} tokens is beyond the {} tokens a model takes at once", B, T,
              kMaxTokens);
  return model::model_activation_parts(config, static_cast<int>(B), static_cast<int>(T), acts, compute,
                                       device::attention_sizes(gpu, compute));
}

double korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a) {
  const double sbh = static_cast<double>(s) * static_cast<double>(b) * static_cast<double>(h);
  return sbh * (34.0 + 5.0 * static_cast<double>(a) * static_cast<double>(s) / static_cast<double>(h));
}

}  // namespace zerodp::plan
