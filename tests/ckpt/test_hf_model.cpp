// GPT-2 as a Hugging Face model directory (ckpt/hf_model.h, docs/reference/files.md#model-directories):
// directories laid out as transformers' GPT2LMHeadModel.save_pretrained writes them (written here by
// hand, not by zerodp's writer, so that a mistake shared by the writer and the reader cannot pass)
// are read with and without the "transformer." prefix, in one file or in shards, in F32 and BF16,
// ignoring the mask buffers and lm_head; a range is read from its own bytes only; zerodp's own
// directories round-trip bit for bit under transformers' names; each kind of bad directory is refused
// naming the file, the tensor or key, and the shapes; and which form `--out` takes (output_form).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/hf_model.h"
#include "ckpt/model_output.h"
#include "ckpt/model_source.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/fs.h"
#include "error_message.h"
#include "unit_values.h"

namespace zerodp::ckpt {
namespace {

namespace fs = std::filesystem;
using model::GPT2Config;
using model::ParamInfo;
using model::ParamLayout;
using zerodp::testing::error_message;

GPT2Config tiny_gpt2() { return GPT2Config{2, 2, 8, 11, 6}; }  // L2 H2 C8 V11 N6

using ckpt::testing::unit_values;

// The config.json transformers 4.49 writes for GPT2Config(n_embd=8, n_layer=2, n_head=2, vocab_size=11,
// n_positions=6): no n_ctx and no tie_word_embeddings (both defaults), dropout and summary keys zerodp
// has no use for.
nlohmann::json transformers_config() {
  return nlohmann::json::parse(R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_embd": 8, "n_head": 2, "n_inner": null,
    "n_layer": 2, "n_positions": 6, "reorder_and_upcast_attn": false, "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true, "summary_activation": null,
    "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
    "summary_use_proj": true, "torch_dtype": "float32", "transformers_version": "4.49.0", "use_cache": true,
    "vocab_size": 11})");
}

class HfGpt2DirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_hf_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/model";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // What a directory holds, as a test lays it out.
  struct Spec {
    std::string prefix = "transformer.";
    DType dtype = DType::kF32;
    size_t shards = 1;          // > 1: the layout's tensors dealt out in order, with an index
    bool buffers = true;        // h.{i}.attn.bias, h.{i}.attn.masked_bias and lm_head.weight too
    std::string skip;           // a tensor left out (layout name)
    std::string reshape;        // a tensor written flat (layout name)
    std::string extra;          // a tensor added, of shape [3]
    nlohmann::json config = transformers_config();
  };

  void write_dir(const Spec& s) {
    fs::create_directories(dir_);
    const ParamLayout layout(tiny_gpt2());
    const auto units = unit_values(layout);
    std::vector<std::vector<TensorSpec>> files(s.shards);
    std::vector<std::vector<const ParamInfo*>> params(s.shards);
    const size_t per_file = (layout.params().size() + s.shards - 1) / s.shards;
    for (size_t i = 0; i < layout.params().size(); ++i) {
      const ParamInfo& p = layout.params()[i];
      if (p.name == s.skip) continue;
      Shape shape = p.name == s.reshape ? Shape{static_cast<int64_t>(p.numel)} : p.shape;
      files[i / per_file].push_back({s.prefix + p.name, s.dtype, shape});
      params[i / per_file].push_back(&p);
    }
    if (s.buffers) {
      files.back().push_back({s.prefix + "h.0.attn.bias", DType::kF32, {1, 1, 6, 6}});
      files.back().push_back({s.prefix + "h.1.attn.masked_bias", DType::kF32, {}});
      files.back().push_back({"lm_head.weight", DType::kF32, {11, 8}});
    }
    if (!s.extra.empty()) files.back().push_back({s.extra, DType::kF32, {3}});
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t f = 0; f < s.shards; ++f) {
      const std::string name = s.shards == 1 ? std::string("model.safetensors")
                                             : "model-0000" + std::to_string(f + 1) + "-of-0000" +
                                                   std::to_string(s.shards) + ".safetensors";
      SafetensorsWriter w(dir_ + "/" + name, files[f], {{"format", "pt"}});
      for (const ParamInfo* p : params[f])
        w.write_tensor_f32(s.prefix + p->name, units[static_cast<size_t>(p->unit)].data() + p->offset);
      for (size_t k = params[f].size(); k < files[f].size(); ++k) {
        std::vector<float> zeros(static_cast<size_t>(shape_numel(files[f][k].shape)), 0.0f);
        w.write_tensor_f32(files[f][k].name, zeros.data());
      }
      w.commit();
      for (const TensorSpec& t : files[f]) weight_map[t.name] = name;
    }
    if (s.shards > 1) write_file_atomic(dir_ + "/model.safetensors.index.json",
                                        nlohmann::json{{"metadata", nlohmann::json::object()},
                                                       {"weight_map", weight_map}}.dump());
    write_file_atomic(dir_ + "/config.json", s.config.dump(2));
  }

  // Every unit read whole equals the values written.
  void expect_values(const HfModelDir& d) {
    const ParamLayout layout(d.config());
    const auto units = unit_values(layout);
    for (int u = 0; u < layout.num_units(); ++u) {
      std::vector<float> got(layout.unit_numel(u), -1.0f);
      d.read_unit_range(layout, u, 0, got.size(), got.data());
      EXPECT_EQ(got, units[static_cast<size_t>(u)]) << "unit " << u;
    }
  }

  // HfModelDir::open refuses the directory with a UsageError naming each of `needles`.
  void expect_refused(const std::vector<std::string>& needles) {
    const std::string e = error_message<UsageError>([&] { HfModelDir::open(dir_); });
    ASSERT_FALSE(e.empty()) << "opened a bad directory; wanted an error naming " << needles.at(0);
    for (const std::string& n : needles) EXPECT_NE(e.find(n), std::string::npos) << "'" << n << "' not in: " << e;
  }

  std::string root_, dir_;
};

TEST_F(HfGpt2DirTest, ReadsWhatTransformersWrites) {
  write_dir({});
  const HfModelDir d = HfModelDir::open(dir_);
  ASSERT_TRUE(d.config().is_gpt2());
  EXPECT_EQ(d.config().gpt2(), tiny_gpt2());
  EXPECT_EQ(d.dtype(), DType::kF32);
  EXPECT_EQ(d.num_files(), 1u);
  expect_values(d);
  // --init, eval and sample take the directory through ModelSource.
  const ModelSource source = ModelSource::open(dir_);
  EXPECT_TRUE(source.is_model_dir());
  EXPECT_EQ(source.config(), model::ModelConfig(tiny_gpt2()));
  const ResidentWeights resident(dir_ + "/");
  EXPECT_EQ(resident.config(), model::ModelConfig(tiny_gpt2()));
}

TEST_F(HfGpt2DirTest, ReadsShardsInBf16WithoutThePrefix) {
  Spec s;
  s.prefix = "";
  s.dtype = DType::kBF16;
  s.shards = 3;
  s.config["n_ctx"] = 6;  // the Hub's older configs carry it beside n_positions
  write_dir(s);
  const HfModelDir d = HfModelDir::open(dir_);
  EXPECT_EQ(d.num_files(), 3u);
  EXPECT_EQ(d.dtype(), DType::kBF16);
  expect_values(d);  // exact: every value is a BF16 number
}

TEST_F(HfGpt2DirTest, ARangeIsReadFromItsOwnBytesOnly) {
  write_dir({});
  // Every byte of every tensor but h.0.ln_1.bias and h.0.attn.c_attn.weight overwritten with 0xFF (a NaN in
  // F32): a range inside those two tensors must not see them.
  const std::string file = dir_ + "/model.safetensors";
  const SafetensorsReader r = SafetensorsReader::open(file);
  const std::string bytes = read_small_file(file, size_t{1} << 20);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  std::string spoilt = bytes;
  for (const TensorEntry& t : r.tensors()) {
    if (t.name == "transformer.h.0.ln_1.bias" || t.name == "transformer.h.0.attn.c_attn.weight") continue;
    for (size_t k = 0; k < t.nbytes; ++k) spoilt[8 + header + t.offset + k] = '\xff';
  }
  write_file_atomic(file, spoilt);
  const HfModelDir d = HfModelDir::open(dir_);
  const ParamLayout layout(d.config());
  const ParamInfo& bias = layout.param(1, model::kLn1B);
  const ParamInfo& weight = layout.param(1, model::kAttnW);
  ASSERT_EQ(bias.offset + bias.numel, weight.offset);
  const size_t begin = bias.offset + 3, count = bias.numel - 3 + 20;  // across the two tensors' boundary
  std::vector<float> got(count);
  d.read_unit_range(layout, 1, begin, count, got.data());
  const auto units = unit_values(layout);
  EXPECT_EQ(got, std::vector<float>(units[1].begin() + static_cast<ptrdiff_t>(begin),
                                    units[1].begin() + static_cast<ptrdiff_t>(begin + count)));
}

TEST_F(HfGpt2DirTest, ZerodpsDirectoriesRoundTripUnderTransformersNames) {
  const ParamLayout layout(tiny_gpt2());
  const auto units = unit_values(layout);
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const uint64_t shard_bytes : {kDefaultShardBytes, uint64_t{600}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", shards of " + std::to_string(shard_bytes));
      std::error_code ec;
      fs::remove_all(dir_, ec);
      // A trailing '/' names the same directory (nothing is staged inside it).
      save_model(ModelOutput{dir_ + "/"}, ModelForm::kModelDir, layout, dtype, shard_bytes,
                 [&](int u) { return units[static_cast<size_t>(u)].data(); });
      EXPECT_EQ(std::vector<std::string>{}, [&] {
        std::vector<std::string> beside;  // nothing left beside the target
        for (const auto& e : fs::directory_iterator(root_))
          if (e.path().filename() != "model") beside.push_back(e.path().filename().string());
        return beside;
      }());
      const nlohmann::json config = nlohmann::json::parse(read_small_file(dir_ + "/config.json", 1 << 20));
      EXPECT_EQ(config.at("model_type"), "gpt2");
      EXPECT_EQ(config.at("architectures"), nlohmann::json::array({"GPT2LMHeadModel"}));
      EXPECT_EQ(config.at("n_positions"), 6);
      EXPECT_EQ(config.at("n_embd"), 8);
      EXPECT_EQ(config.at("layer_norm_epsilon"), 1e-5);
      EXPECT_EQ(config.at("tie_word_embeddings"), true);
      EXPECT_EQ(config.at("activation_function"), "gelu_new");
      EXPECT_EQ(config.at("torch_dtype"), torch_dtype_name(dtype));
      const std::vector<std::string> files = hf_shard_files(layout, dtype, shard_bytes);
      const bool sharded = files.front() != "model.safetensors";
      EXPECT_EQ(sharded, shard_bytes == 600);
      EXPECT_EQ(file_exists(dir_ + "/model.safetensors.index.json"), sharded);
      // Every tensor under transformers' name in its file and dtype; no lm_head (tied).
      for (size_t i = 0; i < layout.params().size(); ++i) {
        const SafetensorsReader r = SafetensorsReader::open(dir_ + "/" + files[i]);
        const TensorEntry* t = r.find("transformer." + layout.params()[i].name);
        ASSERT_NE(t, nullptr) << layout.params()[i].name << " in " << files[i];
        EXPECT_EQ(t->dtype, dtype);
        EXPECT_EQ(t->shape, layout.params()[i].shape);
        EXPECT_EQ(r.find("lm_head.weight"), nullptr);
      }
      const HfModelDir d = HfModelDir::open(dir_);
      EXPECT_EQ(d.config(), model::ModelConfig(tiny_gpt2()));
      EXPECT_EQ(d.dtype(), dtype);
      expect_values(d);
    }
  }
}

TEST_F(HfGpt2DirTest, RefusesMissingUnknownMisshapenAndDoubledTensors) {
  Spec missing;
  missing.skip = "h.1.mlp.c_fc.weight";
  write_dir(missing);
  expect_refused({dir_, "missing tensor 'transformer.h.1.mlp.c_fc.weight'", "[8, 32]"});

  fs::remove_all(dir_);
  Spec shape;
  shape.reshape = "h.0.attn.c_attn.weight";
  write_dir(shape);
  expect_refused(
      {dir_ + "/model.safetensors", "'transformer.h.0.attn.c_attn.weight'", "shape [192]", "expected [8, 24]"});

  fs::remove_all(dir_);
  Spec unknown;
  unknown.extra = "transformer.h.0.attn.rotary.weight";
  write_dir(unknown);
  expect_refused({dir_ + "/model.safetensors", "unknown tensor 'transformer.h.0.attn.rotary.weight'", "[3]"});

  fs::remove_all(dir_);
  Spec twice;  // wpe.weight both with and without the prefix
  twice.extra = "wpe.weight";
  write_dir(twice);
  expect_refused({"'wpe.weight' appears twice", "'transformer.wpe.weight'"});

  // A config.json claiming many more layers than the files hold is refused before a layout of that
  // many layers is built, naming the first tensor it lacks.
  fs::remove_all(dir_);
  Spec deep;
  deep.config["n_layer"] = 65536;
  write_dir(deep);
  expect_refused({dir_, "missing tensor 'transformer.h.2.ln_1.weight'", "L65536"});
}

TEST_F(HfGpt2DirTest, RefusesConfigsOfAnotherFunction) {
  const struct {
    const char* key;
    nlohmann::json value;
    const char* says;
  } cases[] = {
      {"layer_norm_epsilon", 1e-6, "layer_norm_epsilon is 1e-06"},
      {"tie_word_embeddings", false, "tie_word_embeddings is false"},
      {"activation_function", "relu", "activation_function is \"relu\""},
      {"n_inner", 16, "n_inner is 16"},
      {"n_ctx", 1024, "n_ctx is 1024 and n_positions 6"},
      {"scale_attn_weights", false, "scale_attn_weights is false"},
      {"scale_attn_by_inverse_layer_idx", true, "scale_attn_by_inverse_layer_idx is true"},
      {"n_head", 3, "n_embd (8) must be divisible by n_head (3)"},
      {"n_embd", "8", "'n_embd' is \"8\", not an integer"},
      {"model_type", "gpt3", "model_type is \"gpt3\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    Spec s;
    s.config[c.key] = c.value;
    write_dir(s);
    expect_refused({dir_ + "/config.json", c.says});
    fs::remove_all(dir_);
  }
  Spec no_positions;
  no_positions.config.erase("n_positions");
  write_dir(no_positions);
  expect_refused({dir_ + "/config.json", "no 'n_positions'"});
}

TEST(HfOutputForm, GptTwoKeepsItsFileUnlessAskedForADirectory) {
  const model::ModelConfig gpt2 = tiny_gpt2();
  const model::ModelConfig llama = model::LlamaConfig::from_hf_json(
      nlohmann::json::parse(R"({"model_type": "llama", "num_hidden_layers": 1, "num_attention_heads": 2,
                                "hidden_size": 8, "intermediate_size": 16, "vocab_size": 11,
                                "max_position_embeddings": 6})"),
      "a Llama");
  const std::string existing = "/tmp";  // a directory already: --out there writes a model directory
  EXPECT_EQ(output_form(llama, "out.safetensors", false), ModelForm::kModelDir);
  EXPECT_EQ(output_form(gpt2, "final.safetensors", false), ModelForm::kGpt2File);
  EXPECT_EQ(output_form(gpt2, "final", false), ModelForm::kGpt2File);
  EXPECT_EQ(output_form(gpt2, "final.safetensors", true), ModelForm::kGpt2File);
  EXPECT_EQ(output_form(gpt2, "final", true), ModelForm::kModelDir);
  EXPECT_EQ(output_form(gpt2, "final/", false), ModelForm::kModelDir);
  EXPECT_EQ(output_form(gpt2, existing, false), ModelForm::kModelDir);
}

}  // namespace
}  // namespace zerodp::ckpt
