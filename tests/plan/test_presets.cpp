// The --preset models: each one's parameter count is the published model's (its config.json's), so a
// preset cannot drift from the model it names. Counts are of the config: a tied head counted once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "plan/presets.h"

namespace zerodp::plan {
namespace {

TEST(Presets, ParameterCountsAreThePublishedModels) {
  const std::pair<const char*, int64_t> published[] = {
      {"gpt2", 124439808},           {"gpt2-medium", 354823168},   {"gpt2-large", 774030080},
      {"gpt2-xl", 1557611200},       {"llama-3.2-1b", 1235814400}, {"llama-3.2-3b", 3212749824},
      {"llama-3.1-8b", 8030261248},  {"llama-3.1-70b", 70553706496},
      {"qwen-2.5-0.5b", 494032768},  {"qwen-2.5-7b", 7615616512},
      {"qwen-3-0.6b", 596049920},    {"qwen-3-1.7b", 1720574976},  {"qwen-3-8b", 8190735360},
      {"mistral-7b", 7241732096},    {"smollm-135m", 134515008},
  };
  for (const auto& [name, params] : published) EXPECT_EQ(model_preset(name).param_count(), params) << name;
  EXPECT_EQ(model_preset_names().size(), std::size(published)) << "a preset without a published count here";
}

TEST(Presets, MistralAttendsWithinItsWindow) {
  const model::ModelConfig m = model_preset("mistral-7b");
  ASSERT_TRUE(m.is_llama());
  EXPECT_EQ(m.llama().sliding_window, 4096);
  EXPECT_EQ(m.llama().family, model::LlamaFamily::kMistral);
}

TEST(Presets, AnUnknownNameListsTheKnownOnes) {
  try {
    model_preset("mistral-8x7b");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'mistral-8x7b'"), std::string::npos) << what;
    EXPECT_NE(what.find("mistral-7b"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace zerodp::plan
