#include "optim/lr_schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"
#include "core/strings.h"

namespace zerodp::optim {

namespace {


void require_rate(double x, const char* what) {
  ZDP_REQUIRE(std::isfinite(x) && x >= 0, "learning-rate schedule: {} must be a finite number >= 0, got {}",
              what, x);
}

}  // namespace

namespace {

// Case is ignored when parsing; the first spelling of each is DeepSpeed's class name.
constexpr Spelling<LrScheduleKind> kScheduleNames[] = {
    {LrScheduleKind::kConstant, "constant"},         {LrScheduleKind::kWarmupLR, "WarmupLR"},
    {LrScheduleKind::kWarmupDecayLR, "WarmupDecayLR"}, {LrScheduleKind::kWarmupCosineLR, "WarmupCosineLR"},
    {LrScheduleKind::kWSD, "WSD"},                   {LrScheduleKind::kConstant, "none"},
    {LrScheduleKind::kWarmupLR, "warmup"},           {LrScheduleKind::kWarmupDecayLR, "warmup-decay"},
    {LrScheduleKind::kWarmupDecayLR, "linear"},      {LrScheduleKind::kWarmupCosineLR, "cosine"},
    {LrScheduleKind::kWSD, "warmup-stable-decay"},
};
constexpr Spelling<WarmupType> kWarmupNames[] = {{WarmupType::kLinear, "linear"}, {WarmupType::kLog, "log"}};
constexpr Spelling<DecayType> kDecayNames[] = {
    {DecayType::kLinear, "linear"},      {DecayType::kCosine, "cosine"},     {DecayType::kOneMinusSqrt, "1-sqrt"},
    {DecayType::kCosine, "cos"},         {DecayType::kOneMinusSqrt, "1_sqrt"}, {DecayType::kOneMinusSqrt, "one-minus-sqrt"},
};

}  // namespace

const char* lr_schedule_name(LrScheduleKind k) { return name_of(kScheduleNames, k); }

LrScheduleKind parse_lr_schedule(std::string_view name) {
  if (const auto k = find_spelling(kScheduleNames, name, /*ignore_case=*/true)) return *k;
  throw UsageError(fmt::format(
      "unknown learning-rate schedule '{}' (expected constant, warmup (WarmupLR), warmup-decay "
      "(WarmupDecayLR), cosine (WarmupCosineLR) or wsd (warmup-stable-decay))",
      name));
}

const char* warmup_type_name(WarmupType w) { return name_of(kWarmupNames, w); }

WarmupType parse_warmup_type(std::string_view name) {
  if (const auto w = find_spelling(kWarmupNames, name, /*ignore_case=*/true)) return *w;
  throw UsageError(fmt::format("unknown warmup type '{}' (expected linear or log)", name));
}

const char* decay_type_name(DecayType d) { return name_of(kDecayNames, d); }

DecayType parse_decay_type(std::string_view name) {
  if (const auto d = find_spelling(kDecayNames, name, /*ignore_case=*/true)) return *d;
  throw UsageError(fmt::format("unknown decay type '{}' (expected linear, cosine or 1-sqrt)", name));
}

LrSchedule::LrSchedule(const LrScheduleParams& params, double base_lr, int64_t run_steps)
    : params_(params), base_lr_(base_lr) {
  require_rate(base_lr, "lr");
  require_rate(params.warmup_min_lr, "warmup_min_lr");
  if (params.warmup_max_lr) require_rate(*params.warmup_max_lr, "warmup_max_lr");
  require_rate(params.warmup_min_ratio, "warmup_min_ratio");
  require_rate(params.cos_min_ratio, "cos_min_ratio");
  ZDP_REQUIRE(params.warmup_num_steps >= 0,
              "learning-rate schedule: warmup_num_steps must be >= 0, got {}", params.warmup_num_steps);
  ZDP_REQUIRE(params.total_num_steps >= 0,
              "learning-rate schedule: total_num_steps must be >= 0, got {}", params.total_num_steps);
  // A floor above the peak would make the warmup fall and the decay rise: a typo (--min-lr 5 for 5e-5),
  // not a schedule.
  const bool has_floor = params.kind == LrScheduleKind::kWarmupLR || params.kind == LrScheduleKind::kWarmupDecayLR ||
                         params.kind == LrScheduleKind::kWSD;
  const double peak = params.warmup_max_lr.value_or(base_lr);
  ZDP_REQUIRE(!has_floor || params.warmup_min_lr <= peak,
              "learning-rate schedule {}: --min-lr (warmup_min_lr) {} is above the peak learning rate {} ({}): the "
              "floor must not exceed the peak",
              lr_schedule_name(params.kind), params.warmup_min_lr, peak,
              params.warmup_max_lr ? "warmup_max_lr" : "--lr, optimizer.params.lr");
  if (params.kind == LrScheduleKind::kWarmupCosineLR) {
    ZDP_REQUIRE(params.cos_min_ratio <= 1,
                "learning-rate schedule {}: --min-lr {} is above --lr {} (cos_min_ratio {} > 1): the floor must not "
                "exceed the peak",
                lr_schedule_name(params.kind), params.cos_min_ratio * base_lr, base_lr, params.cos_min_ratio);
    ZDP_REQUIRE(params.warmup_min_ratio <= 1,
                "learning-rate schedule {}: warmup_min_ratio {} is above 1: the warmup would start above --lr",
                lr_schedule_name(params.kind), params.warmup_min_ratio);
  }
  warmup_ = params.warmup_num_steps == 0 ? 0 : std::max<int64_t>(2, params.warmup_num_steps);
  total_ = params.total_num_steps > 0 ? params.total_num_steps : run_steps;
  const bool decays = params.kind == LrScheduleKind::kWarmupDecayLR ||
                      params.kind == LrScheduleKind::kWarmupCosineLR || params.kind == LrScheduleKind::kWSD;
  ZDP_REQUIRE(!decays || total_ > 0,
              "learning-rate schedule {}: total_num_steps must be > 0 (or the run's steps), got {}",
              lr_schedule_name(params.kind), total_);
  if (params.kind == LrScheduleKind::kWSD) {
    ZDP_REQUIRE(params.decay_num_steps >= 0,
                "learning-rate schedule WSD: --decay-steps (decay_num_steps) must be >= 0, got {}",
                params.decay_num_steps);
    // W + D <= T, compared without forming W + D (huge values cannot overflow).
    ZDP_REQUIRE(warmup_ <= total_ && params.decay_num_steps <= total_ - warmup_,
                "learning-rate schedule WSD: --warmup-steps {}{} + --decay-steps {} do not fit in the {} total "
                "steps (--total-steps, or --steps when it is 0): the warmup and the decay tail must not overlap",
                warmup_, warmup_ != params.warmup_num_steps ? " (1 means 2, as in DeepSpeed)" : "",
                params.decay_num_steps, total_);
  }
}

double LrSchedule::warmup_fraction(int64_t step) const {
  if (params_.warmup_type == WarmupType::kLog)
    return std::log(static_cast<double>(step + 1)) / std::log(static_cast<double>(warmup_));
  return static_cast<double>(step) / static_cast<double>(warmup_);
}

double LrSchedule::lr_at(int64_t step) const {
  ZDP_CHECK(step >= 0, "lr_at: step must be >= 0, got {}", step);
  const bool warming = step < warmup_;
  const double peak = params_.warmup_max_lr.value_or(base_lr_);
  const double low = params_.warmup_min_lr;
  switch (params_.kind) {
    case LrScheduleKind::kConstant:
      return base_lr_;
    case LrScheduleKind::kWarmupLR:
      return warming ? low + (peak - low) * warmup_fraction(step) : peak;
    case LrScheduleKind::kWarmupDecayLR: {
      if (warming) return low + (peak - low) * warmup_fraction(step);
      const double left = static_cast<double>(total_ - step) /
                          static_cast<double>(std::max<int64_t>(1, total_ - warmup_));
      return low + (peak - low) * std::max(0.0, left);
    }
    case LrScheduleKind::kWarmupCosineLR: {
      if (warming) {
        const double r0 = params_.warmup_min_ratio;
        return base_lr_ * (r0 + (1.0 - r0) * warmup_fraction(step));
      }
      const double done = static_cast<double>(step - warmup_ + 1) /
                          static_cast<double>(std::max<int64_t>(1, total_ - warmup_));
      const double q = std::min(1.0, done);
      const double c = params_.cos_min_ratio;
      const double ratio = c + (1.0 - c) * (1.0 + std::cos(std::numbers::pi * q)) / 2.0;
      return base_lr_ * std::max(0.0, ratio);
    }
    case LrScheduleKind::kWSD: {
      if (warming) return low + (peak - low) * warmup_fraction(step);
      const int64_t decay = params_.decay_num_steps;
      const int64_t decay_start = total_ - decay;
      if (decay == 0 || step < decay_start) return peak;
      const double q = std::min(1.0, static_cast<double>(step - decay_start + 1) / static_cast<double>(decay));
      double g = 1.0 - q;  // linear
      if (params_.decay_type == DecayType::kCosine)
        g = (1.0 + std::cos(std::numbers::pi * q)) / 2.0;
      else if (params_.decay_type == DecayType::kOneMinusSqrt)
        g = 1.0 - std::sqrt(q);
      return low + (peak - low) * std::max(0.0, g);
    }
  }
  return base_lr_;
}

std::string LrSchedule::describe() const {
  const std::string warm =
      warmup_ > 0 ? fmt::format("warmup={} {}", warmup_, warmup_type_name(params_.warmup_type))
                  : std::string("no warmup");
  switch (params_.kind) {
    case LrScheduleKind::kConstant:
      return fmt::format("constant(lr={})", base_lr_);
    case LrScheduleKind::kWarmupLR:
      return fmt::format("WarmupLR(min_lr={}, max_lr={}, {})", params_.warmup_min_lr,
                         params_.warmup_max_lr.value_or(base_lr_), warm);
    case LrScheduleKind::kWarmupDecayLR:
      return fmt::format("WarmupDecayLR(min_lr={}, max_lr={}, {}, total={})", params_.warmup_min_lr,
                         params_.warmup_max_lr.value_or(base_lr_), warm, total_);
    case LrScheduleKind::kWarmupCosineLR:
      return fmt::format("WarmupCosineLR(lr={}, {}, total={}, warmup_min_ratio={}, cos_min_ratio={})",
                         base_lr_, warm, total_, params_.warmup_min_ratio, params_.cos_min_ratio);
    case LrScheduleKind::kWSD: {
      const int64_t decay = params_.decay_num_steps;
      const int64_t stable = total_ - warmup_ - decay;
      const auto range = [](int64_t n, int64_t first) {
        return n > 0 ? fmt::format(" (steps {}..{})", first, first + n - 1) : std::string();
      };
      return fmt::format("WSD(min_lr={}, max_lr={}, {}, stable={}{}, decay={} {}{}, total={})",
                         params_.warmup_min_lr, params_.warmup_max_lr.value_or(base_lr_), warm, stable,
                         range(stable, warmup_), decay, decay_type_name(params_.decay_type),
                         range(decay, total_ - decay), total_);
    }
  }
  return "?";
}

}  // namespace zerodp::optim
