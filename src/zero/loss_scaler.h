// Dynamic loss scaling for fp16 (DeepSpeed's scheme): the loss is multiplied by `scale` before
// backward so small gradients survive fp16; a step whose gradients overflowed (Inf/NaN on any rank)
// is skipped on every rank. After `hysteresis` overflows in a row the scale halves (never below
// min_scale); after `window` good steps in a row it doubles. A static scale (loss_scale > 0) never
// changes. bf16 and fp32 runs use a scale of 1 and never skip.
#pragma once

#include <cstdint>

namespace zerodp::zero {

struct LossScaleConfig {
  bool enabled = false;           // dynamic or static scaling in use (fp16)
  double static_scale = 0;        // > 0: a fixed scale
  int initial_scale_power = 16;   // dynamic: starts at 2^power
  int window = 1000;              // good steps before the scale doubles
  int hysteresis = 2;             // overflows tolerated before the scale halves
  double min_scale = 1;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& config);
  double scale() const { return scale_; }
  // Records the outcome of a step (overflow or not) and adjusts the scale.
  void update(bool overflow);
  int64_t overflows() const { return overflows_; }

  // For checkpoints.
  struct State {
    double scale;
    int good_steps;
    int hysteresis_left;
    int64_t overflows;
  };
  State state() const { return {scale_, good_steps_, hysteresis_left_, overflows_}; }
  void set_state(const State& s);

 private:
  LossScaleConfig config_;
  double scale_ = 1;
  int good_steps_ = 0;
  int hysteresis_left_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace zerodp::zero
