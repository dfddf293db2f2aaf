// The numbers that decide what a step does once its gradient is reduced: the global loss and
// gradient norm (each rank sums the squares of the gradient it owns; one all-reduce of the two sums),
// whether either is not finite, and the one factor the optimizer multiplies the gradient by
// (unscaling and clipping, docs/reference/model.md#loss). Every rank holds the same two sums, so every
// rank takes the same branch (docs/design.md, "Non-finite numbers").
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "zero/model_states.h"

namespace zerodp::zero {

struct GlobalNumbers {
  double loss = 0;       // mean token cross-entropy over the global batch
  double grad_norm = 0;  // L2 norm of the unscaled gradient, before clipping
  bool nonfinite = false;  // the loss or the gradient held a NaN or an Inf, on some rank
  // With name_units and nonfinite: the units whose gradient held one, ascending (empty when only the
  // loss was not finite).
  std::vector<int> nonfinite_units;
};

// Collective over `world` (all W ranks). loss_sum: this rank's summed token losses; global_tokens:
// the tokens of the whole step; loss_scale: the scale the gradient carries. counts_norm: this rank's
// squares count in the norm (with hybrid sharding every group holds the whole reduced gradient, and
// only the first group's count; a non-finite sum counts wherever it is). name_units: when not
// finite, one more all-reduce (of a flag per unit) finds the units.
GlobalNumbers global_numbers(const ModelStates& st, comm::Communicator& world, bool counts_norm, double loss_sum,
                             double global_tokens, double loss_scale, bool name_units);

// What the optimizer multiplies the scaled gradient by: 1/loss_scale, times the clipping coefficient
// when clip > 0 and the norm exceeds it.
float gradient_factor(double grad_norm, double clip, double loss_scale);

}  // namespace zerodp::zero
