#include "zero/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace zerodp::zero {

LossScaler::LossScaler(const LossScaleConfig& c, bool enabled) : config_(c), enabled_(enabled) {
  if (!enabled) scale_ = 1;
  else if (c.static_scale > 0) scale_ = c.static_scale;
  else scale_ = std::ldexp(1.0, c.initial_scale_power);
  hysteresis_left_ = c.hysteresis;
}

void LossScaler::update(bool overflow) {
  if (!overflow) {
    overflows_at_min_ = 0;
    if (!dynamic()) return;
    ++good_steps_;
    if (config_.consecutive_hysteresis) hysteresis_left_ = config_.hysteresis;
    if (good_steps_ % config_.window == 0) {
      scale_ *= 2;
      hysteresis_left_ = config_.hysteresis;
    }
    return;
  }
  ++overflows_;
  if (!enabled_) return;
  if (!dynamic()) {
    ++overflows_at_min_;  // a static scale is its own minimum
    return;
  }
  good_steps_ = 0;
  if (config_.hysteresis <= 1 || hysteresis_left_ <= 1) {
    if (scale_ <= config_.min_scale) ++overflows_at_min_;
    scale_ = std::max(config_.min_scale, scale_ / 2);
  } else {
    --hysteresis_left_;
  }
}

bool LossScaler::stuck() const {
  return enabled_ && config_.max_overflows_at_min_scale > 0 &&
         overflows_at_min_ >= config_.max_overflows_at_min_scale;
}

void LossScaler::set_state(const State& s) {
  scale_ = s.scale;
  good_steps_ = s.good_steps;
  hysteresis_left_ = s.hysteresis_left;
  overflows_ = s.overflows;
  overflows_at_min_ = 0;
}

}  // namespace zerodp::zero
