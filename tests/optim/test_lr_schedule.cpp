// Learning-rate schedules: values at chosen steps, worked out by hand from DeepSpeed's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace zerodp::optim {
namespace {

LrScheduleParams params(LrScheduleKind kind, int64_t warmup, WarmupType type = WarmupType::kLinear) {
  LrScheduleParams p;
  p.kind = kind;
  p.warmup_num_steps = warmup;
  p.warmup_type = type;
  return p;
}

TEST(LrSchedule, ConstantIgnoresTheStep) {
  const LrSchedule s(params(LrScheduleKind::kConstant, 0), 6e-4, 100);
  EXPECT_EQ(s.lr_at(0), 6e-4);
  EXPECT_EQ(s.lr_at(99), 6e-4);
  EXPECT_EQ(s.lr_at(100000), 6e-4);
}

TEST(LrSchedule, WarmupLRLinear) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupLR, 10);
  p.warmup_min_lr = 1e-4;
  p.warmup_max_lr = 1e-3;
  const LrSchedule s(p, /*base_lr=*/5.0, 100);  // warmup_max_lr set: the base lr is not used
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr_at(5), 1e-4 + 9e-4 * 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 1e-4 + 9e-4 * 0.9);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr_at(5000), 1e-3);
}

TEST(LrSchedule, WarmupLRLogPeaksAtTheOptimizerLrWhenNoMaxIsGiven) {
  const LrSchedule s(params(LrScheduleKind::kWarmupLR, 100, WarmupType::kLog), 2e-3, 1000);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.0);           // ln(1) / ln(100)
  EXPECT_DOUBLE_EQ(s.lr_at(9), 2e-3 * 0.5);    // ln(10) / ln(100)
  EXPECT_DOUBLE_EQ(s.lr_at(99), 2e-3);         // ln(100) / ln(100)
  EXPECT_DOUBLE_EQ(s.lr_at(100), 2e-3);
}

TEST(LrSchedule, OneWarmupStepMeansTwoAsInDeepSpeed) {
  const LrSchedule s(params(LrScheduleKind::kWarmupLR, 1), 1.0, 10);
  EXPECT_EQ(s.warmup_steps(), 2);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(2), 1.0);
  const LrSchedule none(params(LrScheduleKind::kWarmupLR, 0), 1.0, 10);
  EXPECT_EQ(none.warmup_steps(), 0);
  EXPECT_DOUBLE_EQ(none.lr_at(0), 1.0);
}

TEST(LrSchedule, WarmupDecayLR) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupDecayLR, 10);
  p.warmup_min_lr = 0.1;
  p.warmup_max_lr = 1.1;
  p.total_num_steps = 110;
  const LrSchedule s(p, 1.0, 5);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 0.1 + 1.0 * 0.4);
  EXPECT_DOUBLE_EQ(s.lr_at(10), 1.1);          // (110 − 10) / 100
  EXPECT_DOUBLE_EQ(s.lr_at(60), 0.1 + 0.5);    // (110 − 60) / 100
  EXPECT_DOUBLE_EQ(s.lr_at(109), 0.1 + 0.01);
  EXPECT_DOUBLE_EQ(s.lr_at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(500), 0.1);         // clamped at 0, not negative
}

TEST(LrSchedule, WarmupDecayLRDefaultsItsLengthToTheRun) {
  const LrSchedule s(params(LrScheduleKind::kWarmupDecayLR, 0), 1.0, /*run_steps=*/40);
  EXPECT_EQ(s.total_steps(), 40);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(30), 0.25);
}

TEST(LrSchedule, WarmupCosineLR) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupCosineLR, 10);
  p.total_num_steps = 110;
  p.warmup_min_ratio = 0.2;
  p.cos_min_ratio = 0.1;
  const double lr = 3e-4;
  const LrSchedule s(p, lr, 1);
  EXPECT_DOUBLE_EQ(s.lr_at(0), lr * 0.2);
  EXPECT_DOUBLE_EQ(s.lr_at(5), lr * (0.2 + 0.8 * 0.5));
  EXPECT_DOUBLE_EQ(s.lr_at(9), lr * (0.2 + 0.8 * 0.9));
  // After warmup the cosine runs over s − W + 1 = 1 .. 100.
  EXPECT_DOUBLE_EQ(s.lr_at(10), lr * (0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 0.01)) / 2));
  EXPECT_DOUBLE_EQ(s.lr_at(59), lr * (0.1 + 0.9 * 0.5));
  EXPECT_NEAR(s.lr_at(84), lr * (0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 0.75)) / 2), 1e-18);
  EXPECT_DOUBLE_EQ(s.lr_at(109), lr * 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(1000), lr * 0.1);  // stays at the floor
}

TEST(LrSchedule, CosineLogWarmup) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupCosineLR, 1000, WarmupType::kLog);
  p.total_num_steps = 2000;
  const LrSchedule s(p, 1.0, 1);
  EXPECT_NEAR(s.lr_at(30), std::log(31.0) / std::log(1000.0), 1e-15);
}

TEST(LrSchedule, RejectsBadParameters) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupLR, -1);
  EXPECT_THROW(LrSchedule(p, 1e-3, 10), UsageError);
  p = params(LrScheduleKind::kWarmupCosineLR, 0);
  EXPECT_THROW(LrSchedule(p, 1e-3, 0), UsageError);  // no length to decay over
  p.cos_min_ratio = -0.5;
  EXPECT_THROW(LrSchedule(p, 1e-3, 10), UsageError);
  EXPECT_THROW(LrSchedule(params(LrScheduleKind::kConstant, 0), std::nan(""), 10), UsageError);
  LrScheduleParams q = params(LrScheduleKind::kWarmupLR, 5);
  q.warmup_max_lr = -1.0;
  EXPECT_THROW(LrSchedule(q, 1e-3, 10), UsageError);
}

TEST(LrSchedule, NamesParse) {
  EXPECT_EQ(parse_lr_schedule("WarmupCosineLR"), LrScheduleKind::kWarmupCosineLR);
  EXPECT_EQ(parse_lr_schedule("cosine"), LrScheduleKind::kWarmupCosineLR);
  EXPECT_EQ(parse_lr_schedule("warmupdecaylr"), LrScheduleKind::kWarmupDecayLR);
  EXPECT_EQ(parse_lr_schedule("warmup"), LrScheduleKind::kWarmupLR);
  EXPECT_EQ(parse_lr_schedule("constant"), LrScheduleKind::kConstant);
  EXPECT_THROW(parse_lr_schedule("OneCycle"), UsageError);
  EXPECT_EQ(parse_warmup_type("LOG"), WarmupType::kLog);
  EXPECT_THROW(parse_warmup_type("exp"), UsageError);
  for (auto k : {LrScheduleKind::kConstant, LrScheduleKind::kWarmupLR, LrScheduleKind::kWarmupDecayLR,
                 LrScheduleKind::kWarmupCosineLR})
    EXPECT_EQ(parse_lr_schedule(lr_schedule_name(k)), k);
}

TEST(LrSchedule, DescribeNamesTheSchedule) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupCosineLR, 100);
  const std::string d = LrSchedule(p, 6e-4, 1000).describe();
  EXPECT_NE(d.find("WarmupCosineLR"), std::string::npos) << d;
  EXPECT_NE(d.find("total=1000"), std::string::npos) << d;
}

}  // namespace
}  // namespace zerodp::optim
