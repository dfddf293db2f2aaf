// Writing a model directory keeps what is not the model's (ckpt/model_output.h): the user's files and
// folders stay, the model's own files are replaced, stale shards go only when zerodp's index named
// them, a directory of files but no model is refused unless --overwrite-output-dir, the --init
// directory's tokenizer files come along, and a failed write leaves the earlier model byte for byte.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/hf_model.h"
#include "ckpt/model_output.h"
#include "core/error.h"
#include "core/fs.h"
#include "error_message.h"
#include "temp_dir.h"
#include "unit_values.h"

namespace zerodp::ckpt {
namespace {

namespace fs = std::filesystem;
using model::GPT2Config;
using model::ParamLayout;
using zerodp::testing::error_message;

class ModelOutputTest : public ::testing::Test {
 protected:
  // Writes the tiny GPT-2 (L2 C8 V11) into `out` as a model directory, its values offset by `shift`
  // so that two saves are told apart; shards of 600 bytes when `sharded`.
  void save(const ModelOutput& out, bool sharded, float shift = 0, int fail_at_unit = -1) const {
    std::vector<std::vector<float>> units = ckpt::testing::unit_values(layout_);
    for (auto& u : units)
      for (float& x : u) x += shift;
    save_model(out, ModelForm::kModelDir, layout_, DType::kF32, sharded ? 600 : kDefaultShardBytes, [&](int u) {
      if (u == fail_at_unit) throw RuntimeFailure("disk full (a test's)");
      return static_cast<const float*>(units[static_cast<size_t>(u)].data());
    });
  }
  void write(const std::string& path, const std::string& text) const { std::ofstream(path) << text; }
  std::set<std::string> listing(const std::string& dir) const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
  float first_weight(const std::string& dir) const {
    const HfModelDir m = HfModelDir::open(dir);
    const ParamLayout layout(m.config());
    float x = 0;
    m.read_unit_range(layout, 0, 0, 1, &x);
    return x;
  }

  const ParamLayout layout_{model::ModelConfig(GPT2Config{2, 2, 8, 11, 6})};
  zerodp::testing::TempDir tmp_{"zerodp_mo"};
  const std::string& root_ = tmp_.path();
  const std::string dir_ = tmp_ / "proj";
};

TEST_F(ModelOutputTest, KeepsEveryFileThatIsNotTheModels) {
  save({dir_}, false);
  write(dir_ + "/notes.md", "mine");
  write(dir_ + "/tokenizer.json", "{}");
  fs::create_directory(dir_ + "/src");
  write(dir_ + "/src/train.py", "print()");
  const float before = first_weight(dir_);
  save({dir_}, false, 1.0f);
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"config.json", "model.safetensors", "notes.md", "src",
                                                  "tokenizer.json"}));
  EXPECT_EQ(read_file(dir_ + "/notes.md"), "mine");
  EXPECT_EQ(read_file(dir_ + "/src/train.py"), "print()");
  EXPECT_EQ(first_weight(dir_), before + 1.0f);
  EXPECT_EQ(listing(root_), std::set<std::string>{"proj"});  // nothing staged beside it
}

TEST_F(ModelOutputTest, RefusesADirectoryOfFilesButNoModelUnlessTold) {
  fs::create_directory(dir_);
  write(dir_ + "/notes.md", "mine");
  std::string e = error_message<UsageError>([&] { save({dir_, "--out"}, false); });
  EXPECT_NE(e.find("--out '" + dir_ + "': holds files but no model (no config.json)"), std::string::npos) << e;
  EXPECT_NE(e.find("--overwrite-output-dir"), std::string::npos) << e;
  // A config.json of the user's project (no model_type, no architectures) is not a model's.
  write(dir_ + "/config.json", R"({"learning_rate": 3e-4})");
  e = error_message<UsageError>([&] { check_model_output({dir_, "--hf"}, ModelForm::kModelDir); });
  EXPECT_NE(e.find("--hf '" + dir_ + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("\"model_type\""), std::string::npos) << e;
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"config.json", "notes.md"}));
  EXPECT_EQ(read_file(dir_ + "/config.json"), R"({"learning_rate": 3e-4})");
  // Told: the model is written beside the notes.
  save({dir_, "--out", /*overwrite_output_dir=*/true}, false);
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"config.json", "model.safetensors", "notes.md"}));
  EXPECT_TRUE(holds_model(dir_));
}

TEST_F(ModelOutputTest, RemovesOnlyTheShardsItsOwnIndexNamed) {
  save({dir_}, true);
  const HfIndexFiles shards = read_hf_index_files(dir_);
  ASSERT_GT(shards.files.size(), 1u);
  EXPECT_TRUE(shards.written_by_zerodp);
  write(dir_ + "/model-notes.safetensors", "not a shard of the index");
  // Sharded -> one file: the shards zerodp's index named and the index go; the user's file stays.
  save({dir_}, false, 2.0f);
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"config.json", "model.safetensors", "model-notes.safetensors"}));
  // One file -> sharded: model.safetensors would be read in place of the shards, so it goes.
  save({dir_}, true, 3.0f);
  EXPECT_FALSE(fs::exists(dir_ + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ + "/model.safetensors.index.json"));
  EXPECT_EQ(first_weight(dir_), ckpt::testing::unit_values(layout_)[0][0] + 3.0f);
}

TEST_F(ModelOutputTest, KeepsTheShardsOfAnIndexItDidNotWrite) {
  save({dir_}, true);
  // The index as another tool writes it: no "writer".
  nlohmann::json index = nlohmann::json::parse(read_file(dir_ + "/model.safetensors.index.json"));
  index["metadata"].erase("writer");
  write(dir_ + "/model.safetensors.index.json", index.dump());
  const std::set<std::string> shards = read_hf_index_files(dir_).files;
  save({dir_}, false, 1.0f);
  for (const std::string& f : shards) EXPECT_TRUE(fs::exists(dir_ + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir_ + "/model.safetensors.index.json"));  // else it would be read, not the new file
  EXPECT_EQ(first_weight(dir_), ckpt::testing::unit_values(layout_)[0][0] + 1.0f);
}

TEST_F(ModelOutputTest, BringsTheInitDirectorysTokenizerWhereItIsMissing) {
  const std::string init = root_ + "/downloaded";
  save({init}, false);
  write(init + "/tokenizer.json", "{\"model\": {}}");
  write(init + "/generation_config.json", "{\"do_sample\": true}");
  write(init + "/README.md", "a model card");
  save({dir_, "--out", false, init}, false);
  EXPECT_EQ(listing(dir_), (std::set<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                                  "tokenizer.json"}));
  EXPECT_EQ(read_file(dir_ + "/tokenizer.json"), "{\"model\": {}}");
  // An output with a tokenizer of its own keeps it; --init D --out D keeps everything of D.
  write(dir_ + "/tokenizer.json", "mine");
  save({dir_, "--out", false, init}, false, 1.0f);
  EXPECT_EQ(read_file(dir_ + "/tokenizer.json"), "mine");
  save({init, "--out", false, init}, false, 1.0f);
  EXPECT_EQ(listing(init), (std::set<std::string>{"README.md", "config.json", "generation_config.json",
                                                  "model.safetensors", "tokenizer.json"}));
}

TEST_F(ModelOutputTest, AFailedWriteLeavesTheEarlierModelByteForByte) {
  save({dir_}, true);
  write(dir_ + "/notes.md", "mine");
  std::map<std::string, std::string> before;
  for (const std::string& f : listing(dir_)) before[f] = read_file(dir_ + "/" + f);
  EXPECT_THROW(save({dir_}, false, 1.0f, /*fail_at_unit=*/2), RuntimeFailure);
  std::map<std::string, std::string> after;
  for (const std::string& f : listing(dir_)) after[f] = read_file(dir_ + "/" + f);
  EXPECT_EQ(after, before);  // and no staging directory left inside
  // A new directory that fails is not created at all, and leaves nothing beside.
  EXPECT_THROW(save({root_ + "/new"}, false, 0, 1), RuntimeFailure);
  EXPECT_EQ(listing(root_), std::set<std::string>{"proj"});
}

TEST_F(ModelOutputTest, NamesTheFlagTheUserGave) {
  const std::string e = error_message<UsageError>(
      [&] { check_model_output({root_ + "/no/such/dir", "--hf"}, ModelForm::kModelDir); });
  EXPECT_NE(e.find("--hf '" + root_ + "/no/such/dir'"), std::string::npos) << e;
  EXPECT_EQ(e.find("--out"), std::string::npos) << e;
  const std::string f = error_message<UsageError>(
      [&] { check_model_output({root_ + "/no/final.safetensors", "--out"}, ModelForm::kGpt2File); });
  EXPECT_NE(f.find("does not exist"), std::string::npos) << f;
}

}  // namespace
}  // namespace zerodp::ckpt
