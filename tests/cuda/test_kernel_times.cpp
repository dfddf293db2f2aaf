// The host side of $ZERODP_GPU_PROFILE: times added by entry, ranked, and the report's lines.
#include <gtest/gtest.h>

#include "cuda/kernel_times.h"

namespace zerodp::cuda {
namespace {

TEST(KernelTimes, AddsByEntryAndRanksByTotalTime) {
  KernelTimes t;
  EXPECT_TRUE(t.empty());
  t.add("linear_forward", 0.25);
  t.add("attention_backward", 0.5);
  t.add("linear_forward", 0.5);
  t.add("adamw_update", 0.125);
  const auto rows = t.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "linear_forward");
  EXPECT_EQ(rows[0].calls, 2u);
  EXPECT_DOUBLE_EQ(rows[0].total_ms, 0.75);
  EXPECT_EQ(rows[1].name, "attention_backward");
  EXPECT_EQ(rows[2].name, "adamw_update");
  EXPECT_DOUBLE_EQ(t.total_ms(), 1.375);
  EXPECT_EQ(t.calls(), 4u);
}

TEST(KernelTimes, EqualTotalsKeepTheNamesOrder) {
  KernelTimes t;
  t.add("b", 1.0);
  t.add("a", 1.0);
  t.add("c", 2.0);
  const auto rows = t.rows();
  EXPECT_EQ(rows[0].name, "c");
  EXPECT_EQ(rows[1].name, "a");
  EXPECT_EQ(rows[2].name, "b");
}

TEST(KernelTimes, ReportGivesSharesPerCallTimesAndTheUncoveredSpan) {
  KernelTimes t;
  t.add("attention_backward", 3.0);
  t.add("linear_forward", 0.5);
  t.add("linear_forward", 0.5);
  const std::string r = t.report(8.0);
  EXPECT_NE(r.find("3 calls, 4.000 ms timed"), std::string::npos) << r;
  EXPECT_NE(r.find("attention_backward"), std::string::npos) << r;
  EXPECT_NE(r.find("75.0%"), std::string::npos) << r;   // attention's share
  EXPECT_NE(r.find("500.0"), std::string::npos) << r;   // linear_forward: 500 us a call
  EXPECT_NE(r.find("cover 4.000 of the 8.000 ms"), std::string::npos) << r;
  EXPECT_NE(r.find("(50.0%)"), std::string::npos) << r;
  EXPECT_LT(r.find("attention_backward"), r.find("linear_forward")) << r;
  EXPECT_EQ(t.report(0).find("cover"), std::string::npos);  // no span known: no coverage line
}

}  // namespace
}  // namespace zerodp::cuda
