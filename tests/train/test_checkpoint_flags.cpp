// The checkpoint flags of `zerodp train` (docs/checkpoints.md): they land in TrainConfig and its
// JSON, --resume makes --init optional, and flags that need --save-dir are refused without it.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/config.h"

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

}  // namespace
}  // namespace zerodp::train
