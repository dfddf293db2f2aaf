// SGD with momentum, as torch.optim.SGD computes it (nesterov optional), on fp32 arrays.
//
// At step s, t = s + 1, with d the gradient (times grad_scale):
//     d ← d + wd·p                                   (L2 weight decay, only where `decay` is set)
//     buf ← d                      at t = 1          (momentum > 0 only)
//     buf ← μ·buf + (1 − dampening)·d   afterwards
//     d ← d + μ·buf  (nesterov)   or   d ← buf  (otherwise)
//     p ← p − lr·d
// Scalars are rounded once from double to float; per element the arithmetic is float in torch's
// order, each "x + a·y" a single fma as in torch's vectorized add(alpha=) (see adamw.h). With
// momentum 0 there is no state and `buf` may be null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "optim/segment.h"

namespace zerodp::optim {

struct SGDParams {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// The per-step scalars, rounded once from double: what every implementation of the update (this one,
// the GPU's in cuda/kernels_sgd.cu) computes each element with, so that they agree bit for bit.
struct SGDScalars {
  float neg_lr;
  float weight_decay;
  float momentum;
  float one_minus_dampening;
  float grad_scale;
  bool first_step;  // t = 1: the momentum buffer starts as the first direction
  bool use_momentum;
  bool nesterov;
};

// Throws RuntimeFailure unless t >= 1, or for nesterov without momentum or with dampening.
SGDScalars sgd_scalars(const SGDParams& hp, int64_t t, float grad_scale);

// Updates n elements in place; t = step + 1 (>= 1). buf: the momentum buffer (n floats; its
// contents are ignored and overwritten at t = 1). OpenMP-parallel when the range is large.
void sgd_update(float* p, const float* g, float* buf, size_t n, const SGDParams& hp, int64_t t,
                bool decay, float grad_scale = 1.0f);

// Updates every segment of a shard (see adamw_update_segments).
void sgd_update_segments(float* p, const float* g, float* buf, std::span<const ParamSegment> segments,
                         const SGDParams& hp, int64_t t, float grad_scale = 1.0f);

}  // namespace zerodp::optim
