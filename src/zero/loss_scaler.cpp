#include "zero/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace zerodp::zero {

LossScaler::LossScaler(const LossScaleConfig& c) : config_(c) {
  if (!c.enabled) scale_ = 1;
  else if (c.static_scale > 0) scale_ = c.static_scale;
  else scale_ = std::ldexp(1.0, c.initial_scale_power);
  hysteresis_left_ = c.hysteresis;
}

void LossScaler::update(bool overflow) {
  if (overflow) ++overflows_;
  if (!config_.enabled || config_.static_scale > 0) return;
  if (overflow) {
    good_steps_ = 0;
    if (--hysteresis_left_ <= 0) {
      scale_ = std::max(config_.min_scale, scale_ / 2);
      hysteresis_left_ = config_.hysteresis;
    }
    return;
  }
  if (++good_steps_ >= config_.window) {
    scale_ *= 2;
    good_steps_ = 0;
    hysteresis_left_ = config_.hysteresis;
  }
}

void LossScaler::set_state(const State& s) {
  scale_ = s.scale;
  good_steps_ = s.good_steps;
  hysteresis_left_ = s.hysteresis_left;
  overflows_ = s.overflows;
}

}  // namespace zerodp::zero
