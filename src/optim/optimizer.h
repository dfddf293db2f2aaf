// The optimizer as the training engine sees it: which kind, its hyper-parameters, how much state it
// keeps per parameter, and one call that updates a shard (a list of segments) at a given lr.
//
// State layout for a shard of n elements (the `state` array, state_floats_per_param · n floats):
//   AdamW: m = state[0, n), v = state[n, 2n)
//   SGD:   momentum buffer = state[0, n) when momentum > 0; no state otherwise
// Segment offsets index p, g and each of those n-float state planes alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "optim/adamw.h"
#include "optim/segment.h"
#include "optim/sgd.h"

namespace zerodp::optim {

enum class OptimizerKind : uint8_t { kAdamW = 0, kSGD = 1 };

// "AdamW", "SGD" (DeepSpeed's spelling).
const char* optimizer_name(OptimizerKind k);
// Case-insensitive "adamw" or "sgd"; UsageError naming the accepted values otherwise.
OptimizerKind parse_optimizer(std::string_view name);

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamW;
  // AdamW
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // both: decoupled decay for AdamW, L2 added to the gradient for SGD
  double weight_decay = 0.01;
  // SGD
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

// Floats of optimizer state per parameter element: 2 for AdamW, 1 for SGD with momentum, else 0.
size_t state_floats_per_param(const OptimizerSpec& spec);

AdamWParams adamw_params(const OptimizerSpec& spec, double lr);
SGDParams sgd_params(const OptimizerSpec& spec, double lr);

// Updates the shard's segments at learning rate `lr`, step t = step + 1. p, g: the shard's
// parameters and gradients (n elements, the extent the segments index); state: the layout above,
// zeroed before the first step.
void optimizer_step(const OptimizerSpec& spec, double lr, int64_t t, float* p, const float* g,
                    float* state, size_t n, std::span<const ParamSegment> segments,
                    float grad_scale = 1.0f);

}  // namespace zerodp::optim
