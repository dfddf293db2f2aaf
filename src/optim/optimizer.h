// The optimizer as the training engine sees it: which kind, its hyper-parameters, how much state it
// keeps per parameter, and one call that updates a shard (a list of segments) at a given lr.
//
// State layout for a shard of n elements (the `state` array, state_floats_per_param · n floats):
//   AdamW: m = state[0, n), v = state[n, 2n)
//   SGD:   momentum buffer = state[0, n) when momentum > 0; no state otherwise
//   Muon:  AdamW's layout: state[0, n) holds the matrices' momentum and the other tensors' m;
//          state[n, 2n) the other tensors' v (zero on the matrices)
// Segment offsets index p, g and each of those n-float state planes alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/segment.h"
#include "optim/sgd.h"

namespace zerodp::optim {

// Muon: docs/reference/optimizer.md#muon (block matrices; AdamW for the rest).
enum class OptimizerKind : uint8_t { kAdamW = 0, kSGD = 1, kMuon = 2 };

// "AdamW", "SGD", "Muon" (DeepSpeed's spelling).
const char* optimizer_name(OptimizerKind k);
// Case-insensitive "adamw", "sgd" or "muon"; UsageError naming the accepted values otherwise.
OptimizerKind parse_optimizer(std::string_view name);

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamW;
  // AdamW
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // both: decoupled decay for AdamW, L2 added to the gradient for SGD
  double weight_decay = 0.01;
  // SGD; Muon's μ and Nesterov too (its defaults: 0.95, on)
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // Muon: the AdamW tensors' learning rate as a multiple of the step's (DeepSpeed's adam_lr / muon_lr),
  // so that a schedule moves both alike.
  double adam_lr_ratio = 1.0;
};

// Floats of optimizer state per parameter element: 2 for AdamW and Muon, 1 for SGD with momentum, else 0.
size_t state_floats_per_param(const OptimizerSpec& spec);

AdamWParams adamw_params(const OptimizerSpec& spec, double lr);
SGDParams sgd_params(const OptimizerSpec& spec, double lr);
// Muon's matrices at the step's lr; its other tensors take adamw_params at lr·adam_lr_ratio.
MuonParams muon_params(const OptimizerSpec& spec, double lr);

// Updates the shard's segments at learning rate `lr`, step t = step + 1. p, g: the shard's
// parameters and gradients (n elements, the extent the segments index); state: the layout above,
// zeroed before the first step. AdamW and SGD only: Muon's matrices need their whole (the engine's
// zero/muon_step.h).
void optimizer_step(const OptimizerSpec& spec, double lr, int64_t t, float* p, const float* g,
                    float* state, size_t n, std::span<const ParamSegment> segments,
                    float grad_scale = 1.0f);

}  // namespace zerodp::optim
