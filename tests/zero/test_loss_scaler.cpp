// The fp16 loss scaler against sequences worked out by hand from DeepSpeed's update_scale
// (deepspeed/runtime/fp16/loss_scaler.py, DynamicLossScaler): on an overflow, halve if hysteresis
// is 1 or has run down to 1 (and leave it run down), else count it down; on a good step whose
// distance from the last overflow is a multiple of the window, double and restore the hysteresis;
// with consecutive_hysteresis, restore it after every good step.
#include "zero/loss_scaler.h"

#include <vector>

#include <gtest/gtest.h>

namespace zerodp::zero {
namespace {

LossScaleConfig dynamic(int power, int window, int hysteresis, double min_scale = 1) {
  LossScaleConfig c;
  c.initial_scale_power = power;
  c.window = window;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  return c;
}

// The scale after each update of `outcomes` ('O' overflow, 'G' good step).
std::vector<double> scales(LossScaler& s, const char* outcomes) {
  std::vector<double> out;
  for (const char* c = outcomes; *c; ++c) {
    s.update(*c == 'O');
    out.push_back(s.scale());
  }
  return out;
}

TEST(LossScaler, FollowsDeepSpeedsHysteresis) {
  // scale 16, window 3, hysteresis 2, min 1. By hand, DeepSpeed's iterations:
  //  it0 O: hysteresis 2 -> 1, scale 16      it1 O: hysteresis is 1 -> halve: 8 (stays 1)
  //  it2 O: halve again: 4                   it3 G: (3-2) % 3 = 1    it4 G: 2
  //  it5 G: 3 % 3 = 0 -> double: 8, hysteresis back to 2
  //  it6 O: 2 -> 1, scale 8                  it7 G: (7-6) % 3 = 1
  //  it8 O: hysteresis 1 -> 4                it9 O: 2     it10 O: 1     it11 O: at the minimum: 1
  //  it12 G: 1.
  LossScaler s(dynamic(4, 3, 2), true);
  EXPECT_EQ(s.scale(), 16);
  const std::vector<double> want = {16, 8, 4, 4, 4, 8, 8, 8, 4, 2, 1, 1, 1};
  EXPECT_EQ(scales(s, "OOOGGGOGOOOOG"), want);
  EXPECT_EQ(s.overflows(), 8);
  // The resetting scheme zerodp had before (hysteresis restored after every halving) would have
  // kept 8 at it2: 16, 8, 8, ...
}

TEST(LossScaler, GrowthCountsFromTheLastOverflowOrTheStart) {
  // window 2 from the start: it0 G (0 - -1 = 1), it1 G (2 % 2 = 0): double.
  LossScaler s(dynamic(3, 2, 1), true);
  EXPECT_EQ(scales(s, "GGGG"), (std::vector<double>{8, 16, 16, 32}));
  // hysteresis 1: every overflow halves; growth restarts from the overflow.
  EXPECT_EQ(scales(s, "OGGG"), (std::vector<double>{16, 16, 32, 32}));
}

TEST(LossScaler, ConsecutiveHysteresisRestoresAfterEveryGoodStep) {
  LossScaleConfig c = dynamic(4, 1000, 2);
  LossScaler plain(c, true);
  EXPECT_EQ(scales(plain, "OGO"), (std::vector<double>{16, 16, 8}));
  c.consecutive_hysteresis = true;
  LossScaler consecutive(c, true);
  EXPECT_EQ(scales(consecutive, "OGOGO"), (std::vector<double>{16, 16, 16, 16, 16}));
  EXPECT_EQ(scales(consecutive, "O"), (std::vector<double>{8}));  // two in a row
}

TEST(LossScaler, StuckAfterOverflowsInARowAtTheMinimum) {
  LossScaleConfig c = dynamic(3, 1000, 1, 4);
  c.max_overflows_at_min_scale = 3;
  LossScaler s(c, true);
  EXPECT_EQ(scales(s, "O"), std::vector<double>{4});  // 8 -> 4: reaching the minimum is not sitting at it
  EXPECT_FALSE(s.stuck());
  EXPECT_EQ(scales(s, "OO"), (std::vector<double>{4, 4}));
  EXPECT_EQ(s.overflows_at_min_scale(), 2);
  EXPECT_FALSE(s.stuck());
  s.update(false);  // a good step: the count starts over
  EXPECT_EQ(s.overflows_at_min_scale(), 0);
  scales(s, "OOO");
  EXPECT_TRUE(s.stuck());
  c.max_overflows_at_min_scale = 0;  // never
  LossScaler never(c, true);
  scales(never, "OOOOOOOOOO");
  EXPECT_FALSE(never.stuck());
}

TEST(LossScaler, StaticAndDisabled) {
  LossScaleConfig c;
  c.static_scale = 128;
  c.max_overflows_at_min_scale = 2;
  LossScaler s(c, true);
  EXPECT_EQ(scales(s, "OGO"), (std::vector<double>{128, 128, 128}));
  EXPECT_FALSE(s.stuck());
  s.update(true);
  EXPECT_TRUE(s.stuck());  // a static scale that overflows twice in a row cannot help itself
  LossScaler off(LossScaleConfig{}, false);
  EXPECT_EQ(scales(off, "OOOG"), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_FALSE(off.stuck());
}

TEST(LossScaler, StateRoundTrips) {
  LossScaler a(dynamic(4, 3, 2), true);
  scales(a, "OGO");
  LossScaler b(dynamic(4, 3, 2), true);
  b.set_state(a.state());
  EXPECT_EQ(scales(a, "GGGO"), scales(b, "GGGO"));
}

}  // namespace
}  // namespace zerodp::zero
