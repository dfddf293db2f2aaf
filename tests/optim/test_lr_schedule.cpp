// Learning-rate schedules: values at chosen steps, worked out by hand from DeepSpeed's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

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

// WSD over T = 100 steps: warmup W = 10 from 0.1 to 1.1, stable at 1.1, the last D = 20 steps a decay to 0.1.
LrScheduleParams wsd(int64_t warmup, int64_t decay, DecayType type, int64_t total = 100) {
  LrScheduleParams p = params(LrScheduleKind::kWSD, warmup);
  p.warmup_min_lr = 0.1;
  p.warmup_max_lr = 1.1;
  p.total_num_steps = total;
  p.decay_num_steps = decay;
  p.decay_type = type;
  return p;
}

TEST(LrSchedule, WsdLinearBoundaries) {
  const LrSchedule s(wsd(10, 20, DecayType::kLinear), 1.0, 5);
  EXPECT_EQ(s.lr_at(0), 0.1);                       // first warmup step: min
  EXPECT_DOUBLE_EQ(s.lr_at(1), 0.1 + 1.0 * 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(9), 0.1 + 1.0 * 0.9);    // last warmup step: below the peak
  EXPECT_EQ(s.lr_at(10), 1.1);                      // first stable step
  EXPECT_EQ(s.lr_at(45), 1.1);
  EXPECT_EQ(s.lr_at(79), 1.1);                      // last stable step: T − D − 1
  EXPECT_DOUBLE_EQ(s.lr_at(80), 0.1 + 1.0 * (1 - 1.0 / 20));  // first decay step, already one step down
  EXPECT_DOUBLE_EQ(s.lr_at(89), 0.1 + 1.0 * 0.5);
  EXPECT_DOUBLE_EQ(s.lr_at(98), 0.1 + 1.0 * (1.0 / 20));
  EXPECT_EQ(s.lr_at(99), 0.1);                      // last step: min exactly
  EXPECT_EQ(s.lr_at(100), 0.1);                     // past the end: stays there
  EXPECT_EQ(s.lr_at(100000), 0.1);
}

TEST(LrSchedule, WsdCosineAndOneMinusSqrtTails) {
  const LrSchedule c(wsd(10, 20, DecayType::kCosine), 1.0, 5);
  EXPECT_EQ(c.lr_at(79), 1.1);
  EXPECT_DOUBLE_EQ(c.lr_at(80), 0.1 + (1 + std::cos(std::numbers::pi / 20)) / 2);
  EXPECT_DOUBLE_EQ(c.lr_at(89), 0.1 + 0.5);  // q = 1/2
  EXPECT_EQ(c.lr_at(99), 0.1);               // cos(π) = −1: min exactly
  EXPECT_EQ(c.lr_at(150), 0.1);
  const LrSchedule r(wsd(10, 20, DecayType::kOneMinusSqrt), 1.0, 5);
  EXPECT_EQ(r.lr_at(79), 1.1);
  EXPECT_DOUBLE_EQ(r.lr_at(80), 0.1 + (1 - std::sqrt(1.0 / 20)));
  EXPECT_DOUBLE_EQ(r.lr_at(84), 0.1 + 0.5);  // q = 1/4
  EXPECT_EQ(r.lr_at(99), 0.1);
}

TEST(LrSchedule, WsdEdgeShapes) {
  // No decay: the peak to the end, like WarmupLR.
  const LrSchedule flat(wsd(10, 0, DecayType::kLinear), 1.0, 5);
  EXPECT_EQ(flat.lr_at(99), 1.1);
  EXPECT_EQ(flat.lr_at(500), 1.1);
  // W + D = T: no stable phase; the decay starts right after warmup.
  const LrSchedule tight(wsd(10, 90, DecayType::kLinear), 1.0, 5);
  EXPECT_DOUBLE_EQ(tight.lr_at(9), 0.1 + 0.9);
  EXPECT_DOUBLE_EQ(tight.lr_at(10), 0.1 + (1 - 1.0 / 90));
  EXPECT_EQ(tight.lr_at(99), 0.1);
  // No warmup, the whole run a decay of one step: step 0 is already at min.
  const LrSchedule one(wsd(0, 1, DecayType::kLinear, 1), 1.0, 5);
  EXPECT_EQ(one.lr_at(0), 0.1);
  // No warmup: stable from step 0; the length is the run's steps; the peak the optimizer's lr.
  LrScheduleParams p = params(LrScheduleKind::kWSD, 0);
  p.decay_num_steps = 4;
  const LrSchedule run(p, 2e-3, /*run_steps=*/40);
  EXPECT_EQ(run.total_steps(), 40);
  EXPECT_EQ(run.lr_at(0), 2e-3);
  EXPECT_EQ(run.lr_at(35), 2e-3);
  EXPECT_DOUBLE_EQ(run.lr_at(36), 2e-3 * 0.75);
  EXPECT_EQ(run.lr_at(39), 0.0);
  // Log warmup as the other schedules.
  LrScheduleParams l = wsd(100, 10, DecayType::kLinear, 1000);
  l.warmup_type = WarmupType::kLog;
  l.warmup_min_lr = 0;
  l.warmup_max_lr.reset();
  const LrSchedule lg(l, 2e-3, 1);
  EXPECT_DOUBLE_EQ(lg.lr_at(9), 2e-3 * 0.5);  // ln(10) / ln(100)
  EXPECT_DOUBLE_EQ(lg.lr_at(99), 2e-3);       // ln(100) / ln(100): the last warmup step reaches the peak
  EXPECT_EQ(lg.lr_at(989), 2e-3);
  EXPECT_DOUBLE_EQ(lg.lr_at(990), 2e-3 * 0.9);
}

std::string usage_message(const LrScheduleParams& p, double lr, int64_t run_steps) {
  try {
    LrSchedule s(p, lr, run_steps);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LrSchedule, WsdRejectsWhatDoesNotFit) {
  std::string m = usage_message(wsd(10, -1, DecayType::kLinear), 1.0, 5);
  EXPECT_NE(m.find("--decay-steps"), std::string::npos) << m;
  EXPECT_NE(m.find(">= 0"), std::string::npos) << m;
  m = usage_message(wsd(10, 91, DecayType::kLinear), 1.0, 5);  // 10 + 91 > 100
  EXPECT_NE(m.find("--warmup-steps 10"), std::string::npos) << m;
  EXPECT_NE(m.find("--decay-steps 91"), std::string::npos) << m;
  EXPECT_NE(m.find("100 total"), std::string::npos) << m;
  m = usage_message(wsd(1, 99, DecayType::kLinear), 1.0, 5);  // one warmup step means two
  EXPECT_NE(m.find("1 means 2"), std::string::npos) << m;
  EXPECT_NO_THROW(LrSchedule(wsd(1, 98, DecayType::kLinear), 1.0, 5));
  EXPECT_THROW(LrSchedule(wsd(101, 0, DecayType::kLinear), 1.0, 5), UsageError);
  EXPECT_THROW(LrSchedule(wsd(0, 0, DecayType::kLinear, 0), 1.0, 0), UsageError);  // no length at all
  EXPECT_THROW(LrSchedule(wsd(0, std::numeric_limits<int64_t>::max(), DecayType::kLinear), 1.0, 5),
               UsageError);
}

TEST(LrSchedule, WsdDescribe) {
  const std::string d = LrSchedule(wsd(10, 20, DecayType::kCosine), 1.0, 5).describe();
  EXPECT_NE(d.find("WSD("), std::string::npos) << d;
  EXPECT_NE(d.find("warmup=10 linear"), std::string::npos) << d;
  EXPECT_NE(d.find("stable=70 (steps 10..79)"), std::string::npos) << d;
  EXPECT_NE(d.find("decay=20 cosine (steps 80..99)"), std::string::npos) << d;
  EXPECT_NE(d.find("total=100"), std::string::npos) << d;
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
  EXPECT_EQ(parse_lr_schedule("wsd"), LrScheduleKind::kWSD);
  EXPECT_EQ(parse_lr_schedule("Warmup-Stable-Decay"), LrScheduleKind::kWSD);
  for (auto k : {LrScheduleKind::kConstant, LrScheduleKind::kWarmupLR, LrScheduleKind::kWarmupDecayLR,
                 LrScheduleKind::kWarmupCosineLR, LrScheduleKind::kWSD})
    EXPECT_EQ(parse_lr_schedule(lr_schedule_name(k)), k);
  for (auto d : {DecayType::kLinear, DecayType::kCosine, DecayType::kOneMinusSqrt})
    EXPECT_EQ(parse_decay_type(decay_type_name(d)), d);
  EXPECT_EQ(parse_decay_type("COSINE"), DecayType::kCosine);
  EXPECT_THROW(parse_decay_type("exp"), UsageError);
}

TEST(LrSchedule, DescribeNamesTheSchedule) {
  LrScheduleParams p = params(LrScheduleKind::kWarmupCosineLR, 100);
  const std::string d = LrSchedule(p, 6e-4, 1000).describe();
  EXPECT_NE(d.find("WarmupCosineLR"), std::string::npos) << d;
  EXPECT_NE(d.find("total=1000"), std::string::npos) << d;
}

// A floor above the peak is a typo (--min-lr 5 for 5e-5), refused naming the flag and the key; a floor
// equal to the peak is a flat schedule and stays allowed.
TEST(LrSchedule, RefusesAFloorAboveThePeak) {
  const auto message = [](const LrScheduleParams& p, double lr) {
    try {
      LrSchedule(p, lr, 10);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const LrScheduleKind kind : {LrScheduleKind::kWarmupLR, LrScheduleKind::kWarmupDecayLR, LrScheduleKind::kWSD}) {
    LrScheduleParams p = params(kind, 2);
    p.warmup_min_lr = 5;
    const std::string e = message(p, 1e-3);
    EXPECT_NE(e.find("--min-lr (warmup_min_lr) 5 is above the peak learning rate 0.001"), std::string::npos) << e;
    p.warmup_max_lr = 10;  // the peak is warmup_max_lr when given
    EXPECT_EQ(message(p, 1e-3), "");
    p.warmup_min_lr = 10;
    EXPECT_EQ(message(p, 1e-3), "");
  }
  LrScheduleParams cosine = params(LrScheduleKind::kWarmupCosineLR, 2);
  cosine.cos_min_ratio = 10;
  EXPECT_NE(message(cosine, 1e-3).find("is above --lr 0.001 (cos_min_ratio 10 > 1)"), std::string::npos);
  cosine.cos_min_ratio = 0.1;
  cosine.warmup_min_ratio = 2;
  EXPECT_NE(message(cosine, 1e-3).find("warmup_min_ratio 2 is above 1"), std::string::npos);
  LrScheduleParams constant = params(LrScheduleKind::kConstant, 0);
  constant.warmup_min_lr = 5;  // not used by the constant schedule
  EXPECT_EQ(message(constant, 1e-3), "");
}

}  // namespace
}  // namespace zerodp::optim
