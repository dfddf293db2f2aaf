// zero/settings.h: each rule between the ZeRO modes, by its message (the command line, the planner and
// the engine all call check_zero_modes, so these are the messages users see from any of them).
#include "zero/settings.h"

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "error_message.h"

namespace zerodp::zero {
namespace {

std::string refusal(const ZeroSettings& m, int world) {
  return zerodp::testing::error_message<UsageError>([&] { check_zero_modes(m, world); });
}

ZeroSettings modes(int stage, Offload optimizer = Offload::kNone, Offload param = Offload::kNone, int64_t group = 0,
                   int64_t sub_group = 1000) {
  ZeroSettings z;
  z.stage = stage;
  z.offload_optimizer = optimizer;
  z.offload_param = param;
  z.shard_group_size = group;
  z.sub_group_size = sub_group;
  return z;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ZeroModes, EachRuleItsMessage) {
  EXPECT_TRUE(has(refusal(modes(4), 2), "--zero-stage (zero_optimization.stage) must be 0, 1, 2 or 3, got 4"));
  EXPECT_TRUE(has(refusal(modes(0, Offload::kCpu), 2),
                  "--offload-optimizer (zero_optimization.offload_optimizer.device) cpu needs ZeRO stage 1, 2 or 3"));
  EXPECT_TRUE(has(refusal(modes(2, Offload::kCpu, Offload::kCpu), 2),
                  "--offload-param (zero_optimization.offload_param.device) cpu needs ZeRO stage 3"));
  EXPECT_TRUE(has(refusal(modes(3, Offload::kNone, Offload::kNvme), 2),
                  "--offload-param (zero_optimization.offload_param.device) nvme needs --offload-optimizer cpu or nvme"));
  EXPECT_TRUE(has(refusal(modes(1, Offload::kCpu, Offload::kNone, 0, 0), 2),
                  "--sub-group-size (zero_optimization.sub_group_size) must be >= 1, got 0"));
  EXPECT_TRUE(has(refusal(modes(1, Offload::kNone, Offload::kNone, -2), 4),
                  "--shard-group-size (zero_optimization.mics_shard_size) must be a number of ranks >= 1"));
  EXPECT_TRUE(has(refusal(modes(3, Offload::kNone, Offload::kNone, 3), 4),
                  "--shard-group-size (zero_optimization.mics_shard_size) 3 does not divide the 4 ranks"));
}

// Every count of the table within its row's range, the message naming the flag and the key.
TEST(ZeroSettings, EachRangeItsMessage) {
  ZeroSettings z;
  z.reduce_bucket_size = 0;
  EXPECT_TRUE(has(refusal(z, 1), "--reduce-bucket-size (zero_optimization.reduce_bucket_size) must be >= 1, got 0"));
  z = ZeroSettings{};
  z.optimizer_buffer_count = 65;
  EXPECT_TRUE(has(refusal(z, 1),
                  "--buffer-count (zero_optimization.offload_optimizer.buffer_count) must be in 1..64, got 65"));
  z = ZeroSettings{};
  z.param_max_in_cpu = -1;
  EXPECT_TRUE(has(refusal(z, 1), "--max-in-cpu (zero_optimization.offload_param.max_in_cpu) must be >= 0, got -1"));
  EXPECT_EQ(refusal(ZeroSettings{}, 1), "");
}

// The table: each flag and key found, set from text and shown back as the flag would take it.
TEST(ZeroSettings, RowsSetAndShow) {
  ZeroSettings z;
  for (const ZeroSettingRow& row : zero_setting_rows()) {
    if (!row.flag.empty()) {
      EXPECT_EQ(find_zero_setting_by_flag(row.flag), &row);
    }
    if (!row.ds_key.empty()) {
      EXPECT_EQ(find_zero_setting_by_key(row.ds_key), &row);
    }
    set_zero_setting(z, row, zero_setting_text(z, row));  // the defaults parse
  }
  const ZeroSettingRow& stage = *find_zero_setting_by_flag("--zero-stage");
  set_zero_setting(z, stage, "3");
  EXPECT_EQ(z.stage, 3);
  set_zero_setting(z, *find_zero_setting_by_key("offload_param.device"), "nvme");
  EXPECT_EQ(z.offload_param, Offload::kNvme);
  set_zero_setting(z, *find_zero_setting_by_flag("--overlap-comm"), "off");
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_EQ(zero_setting_text(z, *find_zero_setting_by_flag("--overlap-comm")), "false");
  EXPECT_THROW(set_zero_setting(z, stage, "three"), UsageError);
  EXPECT_EQ(find_zero_setting_by_flag("--no-such-flag"), nullptr);
}

TEST(ZeroModes, WhatGoesTogetherPasses) {
  EXPECT_EQ(refusal(modes(0), 3), "");
  EXPECT_EQ(refusal(modes(1, Offload::kNvme), 3), "");
  EXPECT_EQ(refusal(modes(3, Offload::kCpu, Offload::kNvme, 2), 4), "");
  EXPECT_EQ(refusal(modes(3, Offload::kNone, Offload::kCpu), 4), "");
}

TEST(ZeroModes, ShardGroupRanks) {
  EXPECT_EQ(shard_group_ranks(modes(0, Offload::kNone, Offload::kNone, 2), 4), 4);  // stage 0 shards nothing
  EXPECT_EQ(shard_group_ranks(modes(2, Offload::kNone, Offload::kNone, 2), 4), 2);
  EXPECT_EQ(shard_group_ranks(modes(2), 4), 4);
}

TEST(ZeroModes, OffloadNames) {
  for (Offload o : {Offload::kNone, Offload::kCpu, Offload::kNvme}) EXPECT_EQ(parse_offload(offload_name(o), "--x"), o);
  EXPECT_THROW(parse_offload("disk", "--offload-param"), UsageError);
}

}  // namespace
}  // namespace zerodp::zero
