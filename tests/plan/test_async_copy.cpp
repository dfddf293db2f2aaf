// The planner's --async-save: the checkpoint's host copy, by zero/state_copy.h's rule.
#include <gtest/gtest.h>

#include "model/layout.h"
#include "plan/estimator.h"

namespace zerodp::plan {
namespace {

using zero::Offload;

// --async-save: the host copy of a rank's checkpoint state (zero/state_copy.h's rule: its shards' fp32
// weights under master, its optimizer states under optim, each with a 4 KiB block a unit for the file's
// alignment), on top of whatever the host holds already; the device tier is untouched.
TEST(Estimator, AsyncSaveHoldsTheCheckpointsHostCopy) {
  PlanInput in;  // 1e9 parameters over 8 ranks at stage 2 in bf16: a shard of 125M elements
  in.params = 1'000'000'000;
  in.world = 8;
  in.zero.stage = 2;
  in.precision.dtype = DType::kBF16;
  const MemoryEstimate plain = estimate_memory(in);
  in.async_save = true;
  MemoryEstimate m = estimate_memory(in);
  EXPECT_EQ(m.host_by.master, 500'000'000u + 4096);  // a bare count is one unit
  EXPECT_EQ(m.host_by.optim, 1'000'000'000u + 4096);
  EXPECT_EQ(m.host, 1'500'000'000u + 8192);
  EXPECT_EQ(m.total, plain.total);
  in.zero.offload_optimizer = Offload::kCpu;  // the copy beside the offloaded masters and states
  m = estimate_memory(in);
  EXPECT_EQ(m.host_by.master, 2 * 500'000'000u + 4096);
  EXPECT_EQ(m.host_by.optim, 2 * 1'000'000'000u + 4096);
  EXPECT_EQ(m.host, m.host_by.total());
  in.zero.offload_optimizer = Offload::kNone;
  in.zero.shard_group_size = 4;  // hybrid sharding: a 4-rank shard, written by the first group
  EXPECT_EQ(estimate_memory(in).host_by.master, 1'000'000'000u + 4096);
  // A model's units padded as the engine pads them: Σ S of the W-way split.
  PlanInput g;
  g.model = model::GPT2Config{2, 4, 48, 64, 32};
  g.world = 2;
  g.zero.stage = 1;
  g.async_save = true;
  EXPECT_EQ(param_counts(g).units, 3u);  // the embeddings and two blocks, the head tied
  EXPECT_EQ(estimate_memory(g).host_by.master, param_counts(g).shard * 4 + 3 * 4096);
  EXPECT_EQ(estimate_memory(g).host_by.optim, param_counts(g).shard * 8 + 3 * 4096);
}

}  // namespace
}  // namespace zerodp::plan
