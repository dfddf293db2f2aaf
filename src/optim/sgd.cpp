#include "optim/sgd.h"

#include <cmath>

#include "core/error.h"
#include "optim/parallel.h"

namespace zerodp::optim {

SGDScalars sgd_scalars(const SGDParams& hp, int64_t t, float grad_scale) {
  ZDP_CHECK(t >= 1, "SGD step count t = step + 1 must be >= 1, got {}", t);
  ZDP_CHECK(!hp.nesterov || (hp.momentum > 0 && hp.dampening == 0),
            "nesterov momentum needs momentum > 0 and dampening 0");
  SGDScalars s;
  s.neg_lr = static_cast<float>(-hp.lr);
  s.weight_decay = static_cast<float>(hp.weight_decay);
  s.momentum = static_cast<float>(hp.momentum);
  s.one_minus_dampening = static_cast<float>(1.0 - hp.dampening);
  s.grad_scale = grad_scale;
  s.first_step = t == 1;
  s.use_momentum = hp.momentum != 0.0;
  s.nesterov = hp.nesterov;
  return s;
}

namespace {

// kDecay: add wd·p to the gradient. kMomentum: 0 none, 1 first step (buf = d), 2 running buffer.
template <bool kDecay, int kMomentum, bool kNesterov>
void sgd_run(float* __restrict p, const float* __restrict g, float* __restrict buf, size_t n,
             const SGDScalars& s) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    float d = g[i] * s.grad_scale;
    if constexpr (kDecay) d = std::fma(p[i], s.weight_decay, d);
    if constexpr (kMomentum == 1) {
      buf[i] = d;
      if constexpr (kNesterov) d = std::fma(d, s.momentum, d);
    } else if constexpr (kMomentum == 2) {
      const float b = std::fma(d, s.one_minus_dampening, buf[i] * s.momentum);
      buf[i] = b;
      if constexpr (kNesterov)
        d = std::fma(b, s.momentum, d);
      else
        d = b;
    }
    p[i] = std::fma(d, s.neg_lr, p[i]);
  }
}

template <bool kDecay>
void sgd_run_momentum(float* p, const float* g, float* buf, size_t n, const SGDScalars& s) {
  if (!s.use_momentum) return sgd_run<kDecay, 0, false>(p, g, buf, n, s);
  if (s.first_step)
    return s.nesterov ? sgd_run<kDecay, 1, true>(p, g, buf, n, s)
                      : sgd_run<kDecay, 1, false>(p, g, buf, n, s);
  return s.nesterov ? sgd_run<kDecay, 2, true>(p, g, buf, n, s)
                    : sgd_run<kDecay, 2, false>(p, g, buf, n, s);
}

void sgd_run(float* p, const float* g, float* buf, size_t n, const SGDScalars& s, bool decay) {
  // torch skips the decay term entirely when wd == 0 (so p·0 never meets an Inf or NaN).
  if (decay && s.weight_decay != 0.0f)
    sgd_run_momentum<true>(p, g, buf, n, s);
  else
    sgd_run_momentum<false>(p, g, buf, n, s);
}

}  // namespace

void sgd_update(float* p, const float* g, float* buf, size_t n, const SGDParams& hp, int64_t t,
                bool decay, float grad_scale) {
  const SGDScalars s = sgd_scalars(hp, t, grad_scale);
  ZDP_CHECK(buf != nullptr || !s.use_momentum || n == 0, "SGD with momentum needs a buffer");
  detail::parallel_ranges(n, [&](size_t b, size_t e) {
    sgd_run(p + b, g + b, buf ? buf + b : nullptr, e - b, s, decay);
  });
}

void sgd_update_segments(float* p, const float* g, float* buf, std::span<const ParamSegment> segments,
                         const SGDParams& hp, int64_t t, float grad_scale) {
  const SGDScalars s = sgd_scalars(hp, t, grad_scale);
  ZDP_CHECK(buf != nullptr || !s.use_momentum || total_count(segments) == 0,
            "SGD with momentum needs a buffer");
  detail::parallel_segments(segments, [&](const ParamSegment& seg, size_t b, size_t e) {
    const size_t o = seg.offset + b;
    sgd_run(p + o, g + o, buf ? buf + o : nullptr, e - b, s, seg.decay);
  });
}

}  // namespace zerodp::optim
