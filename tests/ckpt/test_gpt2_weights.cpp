// GPT-2 weight files (docs/reference/files.md#safetensors): zerodp's own files round-trip; Hugging Face-style files (with the
// `transformer.` prefix, mask buffers, lm_head, config.json) load; hyper-parameters come from
// __metadata__, then config.json, then the shapes plus --heads; and each kind of bad file is refused
// before anything is read, with a message naming the file, the tensor and both shapes.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ckpt/gpt2_weights.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/fs.h"
#include "model/init.h"
#include "unit_values.h"

namespace zerodp::ckpt {
namespace {

using model::GPT2Config;
using model::ParamInfo;
using model::ParamLayout;

GPT2Config tiny_config() {
  GPT2Config c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.vocab_size = 11;
  c.n_ctx = 6;
  return c;
}

using ckpt::testing::unit_values;

class GPT2WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_w_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : created_) ::unlink(f.c_str());
    ::unlink((dir_ + "/config.json").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) {
    created_.push_back(dir_ + "/" + name);
    return created_.back();
  }

  // Writes the tensors of `c` (values from value_of) under custom names/dtypes, plus extras.
  struct Extra {
    std::string name;
    Shape shape;
  };
  void write_custom(const std::string& file, const GPT2Config& c, const std::string& prefix, DType dtype,
                    const Metadata& meta, const std::vector<Extra>& extras = {}, const std::string& skip = "",
                    const std::string& reshape = "") {
    const ParamLayout layout(c);
    std::vector<TensorSpec> specs;
    for (const ParamInfo& p : layout.params()) {
      if (p.name == skip) continue;
      Shape s = p.shape;
      if (p.name == reshape) s = {static_cast<int64_t>(p.numel)};
      specs.push_back({prefix + p.name, dtype, s});
    }
    for (const Extra& e : extras) specs.push_back({e.name, DType::kF32, e.shape});
    SafetensorsWriter w(file, specs, meta);
    const auto units = unit_values(layout);
    for (const ParamInfo& p : layout.params())
      if (p.name != skip) w.write_f32(units[static_cast<size_t>(p.unit)].data() + p.offset, p.numel);
    for (const Extra& e : extras) {
      std::vector<float> zeros(static_cast<size_t>(shape_numel(e.shape)), 0.0f);
      w.write_f32(zeros.data(), zeros.size());
    }
    w.commit();
  }

  void expect_refused(const std::string& file, std::optional<int> heads, std::vector<std::string> needles) {
    needles.push_back(file);
    try {
      GPT2Weights::open(file, heads);
      ADD_FAILURE() << "opened a bad file; wanted an error mentioning " << needles[0];
    } catch (const UsageError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }

  std::string dir_;
  std::vector<std::string> created_;
};

TEST_F(GPT2WeightsTest, SaveThenLoadRoundTrips) {
  const GPT2Config c = tiny_config();
  const ParamLayout layout(c);
  const auto units = unit_values(layout);
  const std::string file = path("model.safetensors");
  int calls = 0;
  save_gpt2(file, c, layout, [&](int u) {
    EXPECT_EQ(u, calls++);  // units are asked for in order
    return units[static_cast<size_t>(u)].data();
  });
  const GPT2Weights w = GPT2Weights::open(file);
  EXPECT_EQ(w.config(), c);
  EXPECT_EQ(w.config_source(), "__metadata__");
  // Exactly the tensors of docs/reference/model.md#gpt2, in F32, with the config as __metadata__.
  EXPECT_EQ(w.file().tensors().size(), layout.params().size());
  for (const ParamInfo& p : layout.params()) {
    const TensorEntry& t = w.file().at(p.name);
    EXPECT_EQ(t.dtype, DType::kF32);
    EXPECT_EQ(t.shape, p.shape);
  }
  EXPECT_EQ(w.file().metadata().at("n_layer"), "2");
  EXPECT_EQ(w.file().metadata().at("n_head"), "2");
  EXPECT_EQ(w.file().metadata().at("vocab_size"), "11");
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> got(layout.unit_numel(u));
    w.read_unit_range(layout, u, 0, got.size(), got.data());
    EXPECT_EQ(got, units[static_cast<size_t>(u)]) << "unit " << u;
  }
}

TEST_F(GPT2WeightsTest, ShardRangesCrossTensorBoundaries) {
  const GPT2Config c = tiny_config();
  const ParamLayout layout(c);
  const auto units = unit_values(layout);
  const std::string file = path("model.safetensors");
  save_gpt2(file, c, layout, [&](int u) { return units[static_cast<size_t>(u)].data(); });
  const GPT2Weights w = GPT2Weights::open(file);
  for (int u = 0; u < layout.num_units(); ++u) {
    const size_t n = layout.unit_numel(u);
    for (size_t world : {size_t{2}, size_t{3}, size_t{5}}) {
      const size_t shard = (n + world - 1) / world;
      for (size_t r = 0; r < world; ++r) {
        const size_t lo = std::min(n, r * shard), count = std::min(shard, n - lo);
        std::vector<float> got(count);
        w.read_unit_range(layout, u, lo, count, got.data());
        for (size_t k = 0; k < count; ++k) ASSERT_EQ(got[k], units[static_cast<size_t>(u)][lo + k]);
      }
    }
  }
}

TEST_F(GPT2WeightsTest, SavesInitialisedModelsThatReloadBitForBit) {
  const GPT2Config c = tiny_config();
  const ParamLayout layout(c);
  std::vector<float> buf;
  const std::string file = path("init.safetensors");
  save_gpt2(file, c, layout, [&](int u) {
    buf.assign(layout.unit_numel(u), 0.0f);
    model::init_unit_range(c, layout, u, 0, buf.size(), 5, buf.data());
    return buf.data();
  });
  const GPT2Weights w = GPT2Weights::open(file);
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> want(layout.unit_numel(u)), got(layout.unit_numel(u));
    model::init_unit_range(c, layout, u, 0, want.size(), 5, want.data());
    w.read_unit_range(layout, u, 0, got.size(), got.data());
    EXPECT_EQ(got, want);
  }
}

TEST_F(GPT2WeightsTest, HuggingFaceLayoutWithConfigJson) {
  const GPT2Config c = tiny_config();
  const std::string file = path("hf.safetensors");
  write_custom(file, c, "transformer.", DType::kBF16, {{"format", "pt"}},
               {{"transformer.h.0.attn.bias", {1, 1, 6, 6}},
                {"transformer.h.1.attn.masked_bias", {}},
                {"lm_head.weight", {11, 8}}});
  write_file_atomic(
      dir_ + "/config.json",
      std::string(R"({"n_layer": 2, "n_head": "2", "n_embd": 8, "vocab_size": 11, "n_positions": 6,
                                    "model_type": "gpt2"})"));
  const GPT2Weights w = GPT2Weights::open(file);
  EXPECT_EQ(w.config(), c);
  EXPECT_EQ(w.config_source(), dir_ + "/config.json");
  const ParamLayout layout(c);
  const auto units = unit_values(layout);
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> got(layout.unit_numel(u));
    w.read_unit_range(layout, u, 0, got.size(), got.data());
    EXPECT_EQ(got, units[static_cast<size_t>(u)]) << "unit " << u;  // exact in bf16 by construction
  }
  // --heads that contradicts config.json is refused.
  expect_refused(file, 4, {"--heads 4", "n_head 2"});
}

TEST_F(GPT2WeightsTest, ShapesAndHeadsWhenNothingElseSays) {
  const GPT2Config c = tiny_config();
  const std::string file = path("bare.safetensors");
  write_custom(file, c, "", DType::kF16, {});
  expect_refused(file, std::nullopt, {"--heads"});
  const GPT2Weights w = GPT2Weights::open(file, 2);
  EXPECT_EQ(w.config(), c);
  EXPECT_EQ(w.config_source(), "shapes");
  // Heads that do not divide C are refused by name.
  expect_refused(file, 3, {"n_embd", "n_head"});
}

TEST_F(GPT2WeightsTest, MissingUnknownAndMisshapenTensorsAreRefused) {
  GPT2Config c = tiny_config();
  const Metadata meta = {
      {"n_layer", "2"}, {"n_head", "2"}, {"n_embd", "8"}, {"vocab_size", "11"}, {"n_ctx", "6"}};
  const std::string missing = path("missing.safetensors");
  write_custom(missing, c, "", DType::kF32, meta, {}, "h.1.mlp.c_fc.bias");
  expect_refused(missing, std::nullopt, {"missing tensor 'h.1.mlp.c_fc.bias'", "[32]"});

  const std::string reshaped = path("reshaped.safetensors");
  write_custom(reshaped, c, "", DType::kF32, meta, {}, "", "h.0.attn.c_attn.weight");
  expect_refused(reshaped, std::nullopt, {"'h.0.attn.c_attn.weight'", "[192]", "[8, 24]"});

  const std::string unknown = path("unknown.safetensors");
  write_custom(unknown, c, "", DType::kF32, meta, {{"h.0.mlp.extra.weight", {3}}});
  expect_refused(unknown, std::nullopt, {"unknown tensor 'h.0.mlp.extra.weight'"});

  const std::string twice = path("twice.safetensors");
  write_custom(twice, c, "", DType::kF32, meta, {{"transformer.ln_f.bias", {8}}});
  expect_refused(twice, std::nullopt, {"'ln_f.bias'", "twice"});

  // A block beyond n_layer is unknown too.
  c.n_layer = 3;
  const std::string extra_block = path("extra_block.safetensors");
  write_custom(extra_block, c, "", DType::kF32, meta);
  expect_refused(extra_block, std::nullopt, {"unknown tensor 'h.2."});
}

TEST_F(GPT2WeightsTest, BadHyperParametersAreRefused) {
  const GPT2Config c = tiny_config();
  const std::string partial = path("partial.safetensors");
  write_custom(partial, c, "", DType::kF32, {{"n_layer", "2"}, {"n_head", "2"}});
  expect_refused(partial, std::nullopt, {"__metadata__", "n_embd"});
  const std::string not_int = path("notint.safetensors");
  write_custom(not_int, c, "", DType::kF32,
               {{"n_layer", "two"}, {"n_head", "2"}, {"n_embd", "8"}, {"vocab_size", "11"}, {"n_ctx", "6"}});
  expect_refused(not_int, std::nullopt, {"n_layer", "'two'"});
  // Metadata that disagrees with the shapes: the shapes are then wrong for that config.
  const std::string wrong = path("wrong.safetensors");
  write_custom(wrong, c, "", DType::kF32,
               {{"n_layer", "2"}, {"n_head", "2"}, {"n_embd", "8"}, {"vocab_size", "12"}, {"n_ctx", "6"}});
  expect_refused(wrong, std::nullopt, {"'wte.weight'", "[11, 8]", "[12, 8]"});
  const std::string bad_json_model = path("cfg.safetensors");
  write_custom(bad_json_model, c, "", DType::kF32, {});
  write_file_atomic(dir_ + "/config.json", std::string("{not json"));
  expect_refused(bad_json_model, 2, {});
  try {
    GPT2Weights::open(bad_json_model, 2);
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zerodp::ckpt
