#include "optim/adamw.h"

#include <cmath>

#include "core/error.h"
#include "optim/parallel.h"

namespace zerodp::optim {

AdamWScalars adamw_scalars(const AdamWParams& hp, int64_t t, float grad_scale) {
  ZDP_CHECK(t >= 1, "AdamW step count t = step + 1 must be >= 1, got {}", t);
  const double td = static_cast<double>(t);
  const double bias1 = 1.0 - std::pow(hp.beta1, td);
  const double bias2 = 1.0 - std::pow(hp.beta2, td);
  AdamWScalars s;
  s.decay_factor = static_cast<float>(1.0 - hp.lr * hp.weight_decay);
  s.beta1 = static_cast<float>(hp.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - hp.beta1);
  s.beta2 = static_cast<float>(hp.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - hp.beta2);
  s.neg_step_size = static_cast<float>(-(hp.lr / bias1));
  s.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  s.eps = static_cast<float>(hp.eps);
  s.grad_scale = grad_scale;
  return s;
}

namespace {

// One contiguous run; kDecay is a template argument so the loop body has no branch and vectorizes.
template <bool kDecay>
void adamw_run(float* __restrict p, const float* __restrict g, float* __restrict m,
               float* __restrict v, size_t n, const AdamWScalars& s) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    float pi = p[i];
    if constexpr (kDecay) pi = pi * s.decay_factor;
    const float mi = std::fma(gi, s.one_minus_beta1, m[i] * s.beta1);
    const float vi = std::fma(s.one_minus_beta2 * gi, gi, v[i] * s.beta2);
    const float denom = std::sqrt(vi) / s.bias2_sqrt + s.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (s.neg_step_size * mi) / denom;
  }
}

void adamw_run(float* p, const float* g, float* m, float* v, size_t n, const AdamWScalars& s,
               bool decay) {
  if (decay)
    adamw_run<true>(p, g, m, v, n, s);
  else
    adamw_run<false>(p, g, m, v, n, s);
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& hp,
                  int64_t t, bool decay, float grad_scale) {
  const AdamWScalars s = adamw_scalars(hp, t, grad_scale);
  detail::parallel_ranges(n, [&](size_t b, size_t e) {
    adamw_run(p + b, g + b, m + b, v + b, e - b, s, decay);
  });
}

void adamw_update_segments(float* p, const float* g, float* m, float* v,
                           std::span<const ParamSegment> segments, const AdamWParams& hp, int64_t t,
                           float grad_scale) {
  const AdamWScalars s = adamw_scalars(hp, t, grad_scale);
  detail::parallel_segments(segments, [&](const ParamSegment& seg, size_t b, size_t e) {
    const size_t o = seg.offset + b;
    adamw_run(p + o, g + o, m + o, v + o, e - b, s, seg.decay);
  });
}

}  // namespace zerodp::optim
