// The checkpoint flags of `zerodp train` (docs/checkpoints.md): they land in TrainConfig and its
// JSON, --resume makes --init optional, and flags that need --save-dir are refused without it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/train_config.h"

namespace zerodp::train {
namespace {

TrainConfig resolved(std::vector<std::pair<std::string, std::string>> given) {
  given.emplace_back("--data", "tokens.bin");
  return resolve_config(given).config;
}

std::string usage_error(const TrainConfig& c) {
  try {
    c.validate(2);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointFlags, LandInTheConfigAndItsJson) {
  const TrainConfig c = resolved({{"--init", "m.safetensors"},
                                  {"--save-dir", "runs/a"},
                                  {"--save-every", "50"},
                                  {"--keep", "3"},
                                  {"--resume", "runs/a/step-100"}});
  EXPECT_EQ(c.save_dir, "runs/a");
  EXPECT_EQ(c.save_every, 50);
  EXPECT_EQ(c.keep, 3);
  EXPECT_EQ(c.resume_path, "runs/a/step-100");
  EXPECT_EQ(usage_error(c), "");
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j["save_dir"], "runs/a");
  EXPECT_EQ(j["save_every"], 50);
  EXPECT_EQ(j["keep"], 3);
  EXPECT_EQ(j["resume"], "runs/a/step-100");
}

TEST(CheckpointFlags, ResumeMakesInitOptional) {
  EXPECT_NE(usage_error(resolved({})).find("--init is required"), std::string::npos);
  EXPECT_EQ(usage_error(resolved({{"--resume", "runs/a"}})), "");
}

TEST(CheckpointFlags, ErrorsSayWhat) {
  const std::pair<std::vector<std::pair<std::string, std::string>>, std::string> cases[] = {
      {{{"--save-every", "10"}}, "--save-dir"},
      {{{"--keep", "2"}}, "--save-dir"},
      {{{"--save-dir", "d"}, {"--save-every", "-1"}}, "--save-every must be >= 0"},
      {{{"--save-dir", "d"}, {"--keep", "-2"}}, "--keep must be in [0, 1000000]"},
  };
  for (const auto& [flags, needle] : cases) {
    auto given = flags;
    given.emplace_back("--init", "m");
    const std::string e = usage_error(resolved(given));
    EXPECT_NE(e.find(needle), std::string::npos) << "wanted '" << needle << "', got '" << e << "'";
  }
  try {
    resolved({{"--save-every", "often"}});
    ADD_FAILURE() << "parsed --save-every often";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--save-every"), std::string::npos) << e.what();
  }
}

TEST(CheckpointFlags, AsyncSaveLandsAndNeedsASaveDir) {
  const TrainConfig c = resolved({{"--init", "m"}, {"--save-dir", "runs/a"}, {"--async-save", "true"}});
  EXPECT_TRUE(c.async_save);
  EXPECT_EQ(c.to_json()["async_save"], true);
  EXPECT_EQ(usage_error(c), "");
  EXPECT_FALSE(resolved({{"--init", "m"}, {"--save-dir", "runs/a"}}).async_save);
  const std::string e = usage_error(resolved({{"--init", "m"}, {"--async-save", "true"}}));
  EXPECT_NE(e.find("--async-save"), std::string::npos) << e;
  EXPECT_NE(e.find("needs --save-dir"), std::string::npos) << e;
}

// DeepSpeed's decoupled checkpoint writer is --async-save; the writer's other keys tune DeepSpeed's own.
TEST(CheckpointFlags, DeepSpeedDecoupledWriterIsAsyncSave) {
  TrainConfig c;
  const auto warnings =
      apply_ds_config(c, R"({"checkpoint": {"writer": {"decoupled": true, "type": "fast"}, "tag_validation": "Warn"}})",
                      "ds.json");
  EXPECT_TRUE(c.async_save);
  ASSERT_EQ(warnings.size(), 2u);
  for (const std::string& w : warnings) EXPECT_NE(w.find("ignoring 'checkpoint."), std::string::npos) << w;
  TrainConfig off;
  apply_ds_config(off, R"({"checkpoint": {"writer": {"decoupled": false}}})", "ds.json");
  EXPECT_FALSE(off.async_save);
  try {
    apply_ds_config(off, R"({"checkpoint": {"writer": {"decoupled": "yes"}}})", "ds.json");
    ADD_FAILURE() << "accepted decoupled \"yes\"";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ds.json: checkpoint.writer.decoupled must be true or false"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zerodp::train
