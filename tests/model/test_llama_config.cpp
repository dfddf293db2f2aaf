// The Llama family's config.json: the parameter counts of published models, RoPE from either of
// transformers' forms, a round trip through to_hf_json, and a message for each thing refused.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/llama_config.h"

namespace zerodp::model {
namespace {

nlohmann::json llama_3_2_1b() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "attention_bias": false,
    "mlp_bias": false, "torch_dtype": "bfloat16",
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

// Each refusal names the file and what is wrong.
void expect_refused(const nlohmann::json& j, const std::string& words) {
  try {
    LlamaConfig::from_hf_json(j, "'bad.json'");
    ADD_FAILURE() << "accepted; expected: " << words;
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'bad.json'"), std::string::npos) << what;
    EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

TEST(LlamaConfig, ParameterCountsOfPublishedModels) {
  const LlamaConfig c = LlamaConfig::from_hf_json(llama_3_2_1b(), "'1b.json'");
  EXPECT_EQ(c.param_count(), 1235814400);  // Llama 3.2 1B, tied head
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.rope_scaling->original_max_position, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);

  nlohmann::json j = llama_3_2_1b();  // Llama 3.1 8B: wider, untied
  j["hidden_size"] = 4096;
  j["intermediate_size"] = 14336;
  j["num_hidden_layers"] = 32;
  j["head_dim"] = 128;
  j["tie_word_embeddings"] = false;
  EXPECT_EQ(LlamaConfig::from_hf_json(j, "'8b.json'").param_count(), 8030261248);

  const auto qwen = nlohmann::json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu", "hidden_size": 896,
    "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 32768, "rope_scaling": null})");
  const LlamaConfig q = LlamaConfig::from_hf_json(qwen, "'qwen.json'");
  EXPECT_EQ(q.family, LlamaFamily::kQwen2);
  EXPECT_EQ(q.head_dim, 64) << "hidden_size / num_attention_heads when head_dim is absent";
  EXPECT_TRUE(q.qkv_bias());
  EXPECT_FALSE(q.o_bias());
  EXPECT_FALSE(q.rope_scaling.has_value());
  EXPECT_EQ(q.param_count(), 494032768);  // Qwen 2.5 0.5B
}

// Qwen 3: Llama's layout with q_norm and k_norm [head_dim] in every block, head_dim given apart from
// hidden_size / num_attention_heads; the counts of Qwen3-0.6B (tied) and Qwen3-8B (untied).
TEST(LlamaConfig, Qwen3NormsEachHeadOfQAndK) {
  auto qwen3 = nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_act": "silu", "hidden_size": 1024,
    "head_dim": 128, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000, "rope_scaling": null, "tie_word_embeddings": true, "attention_bias": false,
    "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28})");
  const LlamaConfig q = LlamaConfig::from_hf_json(qwen3, "'qwen3.json'");
  EXPECT_EQ(q.family, LlamaFamily::kQwen3);
  EXPECT_TRUE(q.qk_norm());
  EXPECT_FALSE(q.qkv_bias());
  EXPECT_FALSE(q.o_bias());
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.param_count(), 596049920);  // Qwen3-0.6B
  const nlohmann::json out = q.to_hf_json("bfloat16");
  EXPECT_EQ(out.at("model_type"), "qwen3");
  EXPECT_EQ(out.at("architectures"), nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(LlamaConfig::from_hf_json(out, "out"), q);

  qwen3["hidden_size"] = 4096;
  qwen3["intermediate_size"] = 12288;
  qwen3["num_hidden_layers"] = 36;
  qwen3["num_attention_heads"] = 32;
  qwen3["tie_word_embeddings"] = false;
  EXPECT_EQ(LlamaConfig::from_hf_json(qwen3, "'8b.json'").param_count(), 8190735360);  // Qwen3-8B
  qwen3["attention_bias"] = true;  // as Llama's: q, k, v and o
  const LlamaConfig biased = LlamaConfig::from_hf_json(qwen3, "'biased.json'");
  EXPECT_TRUE(biased.qkv_bias());
  EXPECT_TRUE(biased.o_bias());
}

// Mistral: Llama's layout without biases, attention within sliding_window keys (null: none). Mistral 7B
// v0.1 has 7,241,732,096 parameters.
TEST(LlamaConfig, MistralKeepsItsSlidingWindow) {
  const auto mistral = nlohmann::json::parse(R"({
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
  const LlamaConfig c = LlamaConfig::from_hf_json(mistral, "'mistral.json'");
  EXPECT_EQ(c.family, LlamaFamily::kMistral);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_FALSE(c.qkv_bias());
  EXPECT_FALSE(c.o_bias());
  EXPECT_FALSE(c.qk_norm());
  EXPECT_EQ(c.param_count(), 7241732096);
  const nlohmann::json j = c.to_hf_json("bfloat16");
  EXPECT_EQ(j["architectures"][0], "MistralForCausalLM");
  EXPECT_EQ(j["sliding_window"], 4096);
  EXPECT_EQ(LlamaConfig::from_hf_json(j, "'again'"), c);

  nlohmann::json v3 = mistral;  // v0.2 on: no window
  v3["sliding_window"] = nullptr;
  const LlamaConfig full = LlamaConfig::from_hf_json(v3, "'v3.json'");
  EXPECT_EQ(full.sliding_window, 0);
  EXPECT_TRUE(full.to_hf_json("float32")["sliding_window"].is_null());
  v3.erase("sliding_window");
  EXPECT_EQ(LlamaConfig::from_hf_json(v3, "'v3.json'").sliding_window, 0);

  nlohmann::json bad = mistral;
  bad["sliding_window"] = 0;
  expect_refused(bad, "'sliding_window' is 0");
  bad["sliding_window"] = 4096;
  bad["attention_bias"] = true;
  expect_refused(bad, "no attention biases");
}

TEST(LlamaConfig, ReadsRopeParametersAsNewerTransformersWritesThem) {
  nlohmann::json j = llama_3_2_1b();
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 250000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  const LlamaConfig c = LlamaConfig::from_hf_json(j, "'v5.json'");
  EXPECT_EQ(c.rope_theta, 250000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  const LlamaConfig plain = LlamaConfig::from_hf_json(j, "'v5.json'");
  EXPECT_FALSE(plain.rope_scaling.has_value());
  EXPECT_EQ(plain.rope_theta, 10000.0);
}

TEST(LlamaConfig, RoundTripsThroughItsConfigJson) {
  const LlamaConfig c = LlamaConfig::from_hf_json(llama_3_2_1b(), "'1b.json'");
  EXPECT_EQ(LlamaConfig::from_hf_json(c.to_hf_json("float32"), "'again'"), c);
  LlamaConfig q = c;
  q.family = LlamaFamily::kQwen2;
  q.rope_scaling.reset();
  const nlohmann::json j = q.to_hf_json("bfloat16");
  EXPECT_EQ(j["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  EXPECT_EQ(LlamaConfig::from_hf_json(j, "'again'"), q);
}


TEST(LlamaConfig, RefusesWhatItDoesNotCompute) {
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = llama_3_2_1b();
    j[key] = std::move(v);
    return j;
  };
  expect_refused(with("model_type", "gpt2"), "zerodp reads 'llama', 'qwen2', 'qwen3' and 'mistral'");
  expect_refused(with("num_key_value_heads", 5), "must divide num_attention_heads");
  expect_refused(with("head_dim", 63), "must be even");
  expect_refused(with("hidden_act", "gelu"), "SiLU-gated");
  expect_refused(with("mlp_bias", true), "no biases");
  expect_refused(with("use_sliding_window", true), "full causal attention");
  expect_refused(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}), "'default' and 'llama3'");
  expect_refused(with("num_hidden_layers", 0), "'num_hidden_layers' is 0");
  expect_refused(with("hidden_size", "2048"), "'hidden_size' is \"2048\"");
  expect_refused(with("rope_theta", 0.5), "rope_theta");
  expect_refused(with("vocab_size", int64_t{1} << 40), "'vocab_size'");
  nlohmann::json j = llama_3_2_1b();
  j.erase("intermediate_size");
  expect_refused(j, "no 'intermediate_size'");
  expect_refused(nlohmann::json::array(), "not a JSON object");
}

}  // namespace
}  // namespace zerodp::model
