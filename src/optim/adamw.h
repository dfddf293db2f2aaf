// AdamW (docs/reference/optimizer.md#adamw) on fp32 arrays: parameters p, gradients g, first and
// second moments m and v.
//
// At step s, t = s + 1:
//     p ← p − lr·wd·p                       (only where `decay` is set)
//     m ← β1·m + (1 − β1)·g ;  v ← β2·v + (1 − β2)·g²
//     p ← p − lr · (m / (1 − β1^t)) / (sqrt(v / (1 − β2^t)) + eps)
//
// Arithmetic, chosen to follow torch.optim.AdamW (single-tensor path) step for step: every
// per-step scalar is computed in double from the double hyper-parameters and then rounded once to
// float: (1 − lr·wd), β1, 1 − β1, β2, 1 − β2, step_size = lr / (1 − β1^t), sqrt(1 − β2^t), eps.
// Everything per element is float, each operation rounded once, fma where torch's vectorized CPU
// kernels fuse (optim/ is compiled with -ffp-contract=off, so nothing else is fused):
//     p = p·(1 − lr·wd)
//     m = fma(g, 1 − β1, m·β1)            (torch: exp_avg.mul_(β1).add_(g, alpha=1 − β1))
//     v = fma((1 − β2)·g, g, v·β2)        (torch: exp_avg_sq.mul_(β2).addcmul_(g, g, 1 − β2))
//     p = p + (−step_size·m) / (sqrt(v) / sqrt(1 − β2^t) + eps)      (torch: addcdiv_)
// which is the formula above rearranged the way torch evaluates it; on an AVX2 machine the
// results equal torch 1.13's bit for bit (tests/optim/test_optim_torch.cpp). The update is elementwise,
// so any sub-range of a flat buffer (a rank's shard) can be updated on its own with the same bits,
// whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "optim/segment.h"

namespace zerodp::optim {

struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// The per-step scalars, rounded once from double: what every implementation of the update (this one,
// the GPU's in cuda/kernels_adamw.cu) computes each element with, so that they agree bit for bit.
struct AdamWScalars {
  float decay_factor;  // 1 − lr·wd
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float neg_step_size;  // −lr / (1 − β1^t)
  float bias2_sqrt;     // sqrt(1 − β2^t)
  float eps;
  float grad_scale;
};

// Throws RuntimeFailure unless t >= 1.
AdamWScalars adamw_scalars(const AdamWParams& hp, int64_t t, float grad_scale);

// Updates n elements in place. t = step + 1 (>= 1). `decay`: whether this range gets weight decay.
// grad_scale multiplies every gradient first (gradient clipping, loss-scale removal); the update
// then sees g·grad_scale, rounded to float, exactly as if the gradients had been scaled beforehand.
// OpenMP-parallel over the range when it is large.
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& hp,
                  int64_t t, bool decay, float grad_scale = 1.0f);

// Updates every segment of a shard: segment k covers p[off, off + count) (and the same elements
// of g, m and v), with its own `decay`. One parallel region for the whole list. Segments must not
// overlap.
void adamw_update_segments(float* p, const float* g, float* m, float* v,
                           std::span<const ParamSegment> segments, const AdamWParams& hp, int64_t t,
                           float grad_scale = 1.0f);

}  // namespace zerodp::optim
