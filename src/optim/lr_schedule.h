// Learning-rate schedules: constant, and DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR
// with their parameters and formulas.
//
// lr_at(s) is the rate of optimizer step s (0-based), computed as DeepSpeed's scheduler computes
// get_lr() when its last_batch_iteration is s. (DeepSpeed's engine steps its scheduler after the
// optimizer, so the rate it actually uses at step s is its formula at s − 1, and at step 0 the
// formula's starting value; zerodp evaluates the formula at the step itself and reports that lr.)
//
// With W warmup steps (W = max(2, warmup_num_steps) as in DeepSpeed; 0 means no warmup) and T
// total steps, the warmup fraction at step s < W is
//     linear: s / W            log: ln(s + 1) / ln(W)
// and
//     constant:        lr
//     WarmupLR:        min + (max − min)·f(s)  during warmup, max after
//     WarmupDecayLR:   min + (max − min)·f(s)  during warmup, then
//                      min + (max − min)·max(0, (T − s) / max(1, T − W))
//     WarmupCosineLR:  lr·(r0 + (1 − r0)·f(s))  during warmup (r0 = warmup_min_ratio), then
//                      lr·max(0, c + (1 − c)·(1 + cos(π·q)) / 2),
//                      q = min(1, (s − W + 1) / max(1, T − W)), c = cos_min_ratio
// where min = warmup_min_lr and max = warmup_max_lr (the optimizer's lr when unset).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zerodp::optim {

enum class LrScheduleKind : uint8_t { kConstant = 0, kWarmupLR, kWarmupDecayLR, kWarmupCosineLR };
enum class WarmupType : uint8_t { kLinear = 0, kLog };

// "constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR".
const char* lr_schedule_name(LrScheduleKind k);
// Case-insensitive: the names above, or the short forms "warmup", "warmup-decay" (also "linear"),
// "cosine". UsageError listing them otherwise.
LrScheduleKind parse_lr_schedule(std::string_view name);
// "linear", "log".
const char* warmup_type_name(WarmupType w);
WarmupType parse_warmup_type(std::string_view name);

struct LrScheduleParams {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_num_steps = 0;          // 0: no warmup
  WarmupType warmup_type = WarmupType::kLinear;
  double warmup_min_lr = 0.0;            // WarmupLR, WarmupDecayLR: start of warmup, end of decay
  std::optional<double> warmup_max_lr;   // WarmupLR, WarmupDecayLR: the peak; unset = optimizer lr
  int64_t total_num_steps = 0;           // WarmupDecayLR, WarmupCosineLR: 0 = the run's steps
  double warmup_min_ratio = 0.0;         // WarmupCosineLR: warmup starts at this fraction of lr
  double cos_min_ratio = 1e-4;           // WarmupCosineLR: decay ends at this fraction of lr
};

class LrSchedule {
 public:
  // base_lr: the optimizer's lr; run_steps: the number of steps of the run, used when
  // total_num_steps is 0. Throws UsageError for negative step counts, non-finite or negative rates
  // and ratios.
  LrSchedule(const LrScheduleParams& params, double base_lr, int64_t run_steps);

  double lr_at(int64_t step) const;

  const LrScheduleParams& params() const { return params_; }
  double base_lr() const { return base_lr_; }
  // The effective warmup length (DeepSpeed's minimum of 2 applied) and total steps.
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }
  // One line for logs: "WarmupCosineLR(lr=0.0006, warmup=100 linear, total=1000, cos_min_ratio=0.1)".
  std::string describe() const;

 private:
  double warmup_fraction(int64_t step) const;

  LrScheduleParams params_;
  double base_lr_;
  int64_t warmup_;
  int64_t total_;
};

}  // namespace zerodp::optim
