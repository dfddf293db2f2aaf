// Dynamic loss scaling for fp16, with DeepSpeed's semantics (its DynamicLossScaler.update_scale):
// the loss is multiplied by `scale` before backward so that small gradients survive fp16; a step
// whose loss or gradients are not finite on any rank is skipped on every rank, and then
//  - if hysteresis is 1 or has run down to 1, the scale halves (never below min_scale); the
//    hysteresis stays run down, so further overflows halve again at once;
//  - otherwise the hysteresis counts down by one and the scale stays.
// A good step whose distance from the last overflow (or from the start) is a multiple of `window`
// doubles the scale and restores the hysteresis; with consecutive_hysteresis, every good step
// restores it. A static scale (static_scale > 0) never changes. bf16 and fp32 runs use a scale of 1.
//
// DeepSpeed raises at the first overflow at the minimum scale. zerodp lets the scale sit there for
// `max_overflows_at_min_scale` overflowing steps in a row and then reports stuck(): a run whose
// gradients overflow even at the smallest scale is broken, and skipping forever would hide it.
#pragma once

#include <cstdint>

namespace zerodp::zero {

struct LossScaleConfig {
  double static_scale = 0;        // > 0: a fixed scale
  int initial_scale_power = 16;   // dynamic: starts at 2^power
  int64_t window = 1000;             // good steps between doublings
  int hysteresis = 2;             // DeepSpeed's delayed_shift: overflows before the scale halves
  bool consecutive_hysteresis = false;  // restore the hysteresis after every good step
  double min_scale = 1;
  int64_t max_overflows_at_min_scale = 10;  // overflowing steps in a row at min_scale before stuck()
};

class LossScaler {
 public:
  // `enabled`: the run scales its loss (fp16); otherwise the scale is 1 and never changes.
  LossScaler(const LossScaleConfig& config, bool enabled);
  double scale() const { return scale_; }
  // Records the outcome of a step (overflow or not) and adjusts the scale.
  void update(bool overflow);
  int64_t overflows() const { return overflows_; }
  // The scale was already at its minimum for the last max_overflows_at_min_scale overflowing steps
  // in a row (dynamic scaling), or a static scale overflowed that many times in a row.
  bool stuck() const;
  int overflows_at_min_scale() const { return overflows_at_min_; }

  // For checkpoints. good_steps counts the steps since the last overflow (or the start), which is
  // what DeepSpeed's cur_iter − last_overflow_iter − 1 measures.
  struct State {
    double scale;
    int good_steps;
    int hysteresis_left;
    int64_t overflows;
  };
  State state() const { return {scale_, good_steps_, hysteresis_left_, overflows_}; }
  void set_state(const State& s);

 private:
  bool dynamic() const { return enabled_ && config_.static_scale <= 0; }

  LossScaleConfig config_;
  bool enabled_;
  double scale_ = 1;
  int good_steps_ = 0;
  int hysteresis_left_ = 0;
  int64_t overflows_ = 0;
  int overflows_at_min_ = 0;  // since the run started or resumed
};

}  // namespace zerodp::zero
