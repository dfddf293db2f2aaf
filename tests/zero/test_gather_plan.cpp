// Stage 3's gathers replayed on the models' schedules (zero/gather_plan.h), worked by hand for two
// blocks: which reads gather, from where, and which uses free the unit.
#include <gtest/gtest.h>

#include <vector>

#include "model/layout.h"
#include "zero/gather_plan.h"

namespace zerodp::zero {
namespace {

using S = GatherPlan::Source;

std::vector<S> sources(const GatherPlan& plan, const model::UnitSchedule& schedule) {
  std::vector<S> out;
  for (size_t r = 0; r < schedule.param_reads().size(); ++r) out.push_back(plan.source(r));
  return out;
}
std::vector<bool> frees(const GatherPlan& plan, const model::UnitSchedule& schedule) {
  std::vector<bool> out;
  for (int k = 0; k < schedule.size(); ++k) out.push_back(plan.frees_after(k));
  return out;
}

// GPT-2 (tied head): uses embed, block 0, block 1, head forward; head, block 1, block 0, embed
// backward (the embedding's backward reads no parameters). Reads: unit 0, 1, 2, 0, 0, 2, 1.
TEST(GatherPlan, TiedHeadGathersUnitZeroTwiceAndEveryBlockTwice) {
  const model::UnitSchedule schedule = model::model_schedule(2, false);
  ASSERT_EQ(schedule.param_reads(), (std::vector<int>{0, 1, 2, 0, 0, 2, 1}));
  const GatherPlan plain(schedule, true, false);
  EXPECT_EQ(sources(plain, schedule), (std::vector<S>{S::kFull, S::kFull, S::kFull, S::kFull, S::kNone, S::kFull, S::kFull}));
  // The head's forward keeps unit 0 for its backward; the embedding's backward frees nothing.
  EXPECT_EQ(frees(plain, schedule), (std::vector<bool>{true, true, true, false, true, true, true, false}));
  // hpZ: the first gathers keep slices, the second ones read them (the head's forward too) and drop them.
  const GatherPlan hpz(schedule, true, true);
  EXPECT_EQ(sources(hpz, schedule), (std::vector<S>{S::kFullKeep, S::kFullKeep, S::kFullKeep, S::kSlicesLast, S::kNone,
                                                    S::kSlicesLast, S::kSlicesLast}));
  EXPECT_EQ(frees(hpz, schedule), frees(plain, schedule));
}

// Without reshard_after_forward every unit stays gathered from its forward to its last read: one
// gather each, and so no slices for hpZ.
TEST(GatherPlan, NoReshardAfterForwardGathersEachUnitOnce) {
  const model::UnitSchedule schedule = model::model_schedule(2, false);
  for (const bool hpz : {false, true}) {
    const GatherPlan plan(schedule, false, hpz);
    EXPECT_EQ(sources(plan, schedule),
              (std::vector<S>{S::kFull, S::kFull, S::kFull, S::kNone, S::kNone, S::kNone, S::kNone}));
    EXPECT_EQ(frees(plan, schedule), (std::vector<bool>{false, false, false, false, true, true, true, false}));
  }
}

// Without reshard_after_forward an untied model's unit 0 (the embeddings: read by their forward alone,
// since the embedding's backward reads no parameters) is still freed after that forward, its last read,
// instead of staying gathered through the backward; the untied head from its forward to its backward.
TEST(GatherPlan, NoReshardAfterForwardStillFreesAUnitAfterItsLastRead) {
  const model::UnitSchedule schedule = model::model_schedule(2, true);
  const GatherPlan plan(schedule, false, false);
  EXPECT_EQ(sources(plan, schedule), (std::vector<S>{S::kFull, S::kFull, S::kFull, S::kFull, S::kNone, S::kNone,
                                                     S::kNone}));
  // embed, block 0, block 1, head forward; head, block 1, block 0, embed backward.
  EXPECT_EQ(frees(plan, schedule), (std::vector<bool>{true, false, false, false, true, true, true, false}));
}

// An untied head (unit 3) is read by its forward and backward, one after the other: one gather, no
// slice; unit 0 is read by the embedding's forward only: one gather, no slice.
TEST(GatherPlan, UntiedHeadAndEmbeddingAreGatheredOnce) {
  const model::UnitSchedule schedule = model::model_schedule(2, true);
  ASSERT_EQ(schedule.param_reads(), (std::vector<int>{0, 1, 2, 3, 3, 2, 1}));
  const GatherPlan hpz(schedule, true, true);
  EXPECT_EQ(sources(hpz, schedule), (std::vector<S>{S::kFull, S::kFullKeep, S::kFullKeep, S::kFull, S::kNone,
                                                    S::kSlicesLast, S::kSlicesLast}));
  EXPECT_TRUE(GatherPlan::slice_after(S::kFullKeep));
  EXPECT_FALSE(GatherPlan::slice_after(S::kSlicesLast));
  EXPECT_TRUE(GatherPlan::from_slices(S::kSlicesLast));
  EXPECT_FALSE(GatherPlan::gathers(S::kNone));
}

}  // namespace
}  // namespace zerodp::zero
