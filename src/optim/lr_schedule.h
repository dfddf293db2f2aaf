// Learning-rate schedules: constant, DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR with
// their parameters and formulas, and warmup-stable-decay (WSD, zerodp's: DeepSpeed has none).
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
//     WSD:             min + (max − min)·f(s)  during warmup (s < W), then
//                      max                      for W ≤ s < T − D (stable), then
//                      min + (max − min)·g(q)   for s ≥ T − D (decay),
//                      q = min(1, (s − (T − D) + 1) / D),
//                      g(q) = 1 − q (linear), (1 + cos(π·q)) / 2 (cosine), 1 − sqrt(q) (1-sqrt)
// where min = warmup_min_lr and max = warmup_max_lr (the optimizer's lr when unset).
//
// WSD's boundaries, with D = decay_num_steps ≥ 0 and W + D ≤ T (checked): step 0 is at min (with
// a warmup); the last warmup step W − 1 is at min + (max − min)·f(W − 1) (linear: below max; log:
// f = 1, max already); steps W .. T − D − 1 are at max; the first decay step T − D is already one
// step down (linear: max − (max − min)/D); the last step T − 1 is at min exactly (q = 1 for every
// decay type), and so is every step after it. D = 0: no decay, max to the end (WarmupLR). W + D = T:
// no stable phase. --min-lr sets min, as for WarmupDecayLR: warmup starts there and decay ends there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zerodp::optim {

enum class LrScheduleKind : uint8_t { kConstant = 0, kWarmupLR, kWarmupDecayLR, kWarmupCosineLR, kWSD };
enum class WarmupType : uint8_t { kLinear = 0, kLog };
enum class DecayType : uint8_t { kLinear = 0, kCosine, kOneMinusSqrt };  // WSD's decay tail

// "constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "WSD".
const char* lr_schedule_name(LrScheduleKind k);
// Case-insensitive: the names above, or the short forms "warmup", "warmup-decay" (also "linear"),
// "cosine", "wsd" (also "warmup-stable-decay"). UsageError listing them otherwise.
LrScheduleKind parse_lr_schedule(std::string_view name);
// "linear", "log".
const char* warmup_type_name(WarmupType w);
WarmupType parse_warmup_type(std::string_view name);
// "linear", "cosine", "1-sqrt" (case-insensitive; also "1_sqrt", "one-minus-sqrt").
const char* decay_type_name(DecayType d);
DecayType parse_decay_type(std::string_view name);

struct LrScheduleParams {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_num_steps = 0;          // 0: no warmup
  WarmupType warmup_type = WarmupType::kLinear;
  double warmup_min_lr = 0.0;            // WarmupLR, WarmupDecayLR, WSD: start of warmup, end of decay
  std::optional<double> warmup_max_lr;   // WarmupLR, WarmupDecayLR, WSD: the peak; unset = optimizer lr
  int64_t total_num_steps = 0;           // WarmupDecayLR, WarmupCosineLR, WSD: 0 = the run's steps
  double warmup_min_ratio = 0.0;         // WarmupCosineLR: warmup starts at this fraction of lr
  double cos_min_ratio = 1e-4;           // WarmupCosineLR: decay ends at this fraction of lr
  int64_t decay_num_steps = 0;           // WSD: the decay tail's length D (the last D steps)
  DecayType decay_type = DecayType::kLinear;  // WSD: the tail's shape
};

class LrSchedule {
 public:
  // base_lr: the optimizer's lr; run_steps: the number of steps of the run, used when
  // total_num_steps is 0. Throws UsageError for negative step counts, non-finite or negative rates
  // and ratios, and for WSD when the warmup and the decay do not fit in the total (W + D > T, with W
  // the effective warmup).
  LrSchedule(const LrScheduleParams& params, double base_lr, int64_t run_steps);

  double lr_at(int64_t step) const;

  const LrScheduleParams& params() const { return params_; }
  double base_lr() const { return base_lr_; }
  // The effective warmup length (DeepSpeed's minimum of 2 applied) and total steps.
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }
  // One line for logs: "WarmupCosineLR(lr=0.0006, warmup=100 linear, total=1000, cos_min_ratio=0.1)",
  // "WSD(min_lr=0, max_lr=0.001, warmup=100 linear, stable=700 (steps 100..799), decay=200 cosine
  // (steps 800..999), total=1000)".
  std::string describe() const;

 private:
  double warmup_fraction(int64_t step) const;

  LrScheduleParams params_;
  double base_lr_;
  int64_t warmup_;
  int64_t total_;
};

}  // namespace zerodp::optim
