#include "optim/muon.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/parallel.h"

namespace zerodp::optim {

MuonScalars muon_scalars(const MuonParams& hp, int64_t rows, int64_t cols, float grad_scale) {
  ZDP_CHECK(rows > 0 && cols > 0, "Muon needs a matrix, got {} x {}", rows, cols);
  ZDP_CHECK(hp.momentum >= 0 && hp.momentum < 1, "Muon momentum must be in [0, 1), got {}", hp.momentum);
  MuonScalars s;
  s.mu = static_cast<float>(hp.momentum);
  s.one_minus_mu = static_cast<float>(1.0 - hp.momentum);
  s.decay_factor = static_cast<float>(1.0 - hp.lr * hp.weight_decay);
  const double aspect = std::max(1.0, static_cast<double>(rows) / static_cast<double>(cols));
  s.neg_step = static_cast<float>(-hp.lr * std::sqrt(aspect));
  s.grad_scale = grad_scale;
  s.nesterov = hp.nesterov;
  return s;
}

void muon_momentum(const float* g, float* m, float* u, size_t n, const MuonScalars& s) {
  detail::parallel_ranges(n, [&](size_t b, size_t e) {
    const float* __restrict gi = g + b;
    float* __restrict mi = m + b;
    float* __restrict ui = u + b;
    const size_t k = e - b;
    if (s.nesterov) {
#pragma omp simd
      for (size_t i = 0; i < k; ++i) {
        const float d = gi[i] * s.grad_scale;
        const float mm = std::fma(d, s.one_minus_mu, mi[i] * s.mu);
        mi[i] = mm;
        ui[i] = std::fma(mm, s.mu, d * s.one_minus_mu);
      }
    } else {
#pragma omp simd
      for (size_t i = 0; i < k; ++i) {
        const float mm = std::fma(gi[i] * s.grad_scale, s.one_minus_mu, mi[i] * s.mu);
        mi[i] = mm;
        ui[i] = mm;
      }
    }
  });
}

void muon_apply(float* w, const float* o, size_t n, const MuonScalars& s) {
  detail::parallel_ranges(n, [&](size_t b, size_t e) {
    float* __restrict wi = w + b;
    const float* __restrict oi = o + b;
    const size_t k = e - b;
#pragma omp simd
    for (size_t i = 0; i < k; ++i) wi[i] = std::fma(oi[i], s.neg_step, wi[i] * s.decay_factor);
  });
}

double newton_schulz_flops(int64_t rows, int64_t cols) {
  const double r = static_cast<double>(std::min(rows, cols)), c = static_cast<double>(std::max(rows, cols));
  return kNewtonSchulzSteps * (4 * r * r * c + 2 * r * r * r);
}

}  // namespace zerodp::optim
