// The architecture-neutral layout over Llama-family configs: Hugging Face's tensor names and shapes,
// unit boundaries (an untied head gets a unit of its own), the schedule of unit uses, the
// initialisation rules, and the manifest form of a ModelConfig.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.h"
#include "model/init.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace zerodp::model {
namespace {

LlamaConfig small_llama(bool tied, LlamaFamily family = LlamaFamily::kLlama) {
  LlamaConfig c;
  c.family = family;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.head_dim = 8;
  c.intermediate_size = 40;
  c.vocab_size = 61;
  c.n_ctx = 16;
  c.tie_word_embeddings = tied;
  return c;
}

TEST(LlamaLayout, UntiedHeadIsItsOwnUnit) {
  const LlamaConfig c = small_llama(false);
  const ParamLayout layout(c);
  ASSERT_EQ(layout.num_units(), c.n_layer + 2);
  EXPECT_EQ(layout.head_unit(), c.n_layer + 1);
  EXPECT_EQ(static_cast<int64_t>(layout.total_numel()), c.param_count());
  // The embedding unit holds only the token embedding; the head unit the final norm and lm_head.
  ASSERT_EQ(layout.unit_params(0).size(), 1u);
  EXPECT_EQ(layout.unit_params(0)[0]->name, "model.embed_tokens.weight");
  const auto head = layout.unit_params(layout.head_unit());
  ASSERT_EQ(head.size(), 2u);
  EXPECT_EQ(head[0]->name, "model.norm.weight");
  EXPECT_EQ(head[1]->name, "lm_head.weight");
  EXPECT_EQ(head[1]->shape, (Shape{61, 32}));
  // A block: HF names, PyTorch's [out, in] shapes, q/k/v and gate/up adjacent (one GEMM operand each).
  const ParamInfo* q = layout.find("model.layers.1.self_attn.q_proj.weight");
  const ParamInfo* k = layout.find("model.layers.1.self_attn.k_proj.weight");
  const ParamInfo* v = layout.find("model.layers.1.self_attn.v_proj.weight");
  ASSERT_TRUE(q && k && v);
  EXPECT_EQ(q->unit, ParamLayout::block_unit(1));
  EXPECT_EQ(q->shape, (Shape{32, 32}));
  EXPECT_EQ(k->shape, (Shape{16, 32}));
  EXPECT_EQ(k->offset, q->offset + q->numel);
  EXPECT_EQ(v->offset, k->offset + k->numel);
  const ParamInfo* gate = layout.find("model.layers.2.mlp.gate_proj.weight");
  const ParamInfo* up = layout.find("model.layers.2.mlp.up_proj.weight");
  ASSERT_TRUE(gate && up);
  EXPECT_EQ(gate->shape, (Shape{40, 32}));
  EXPECT_EQ(up->offset, gate->offset + gate->numel);
  EXPECT_EQ(layout.find("model.layers.2.mlp.down_proj.weight")->shape, (Shape{32, 40}));
  EXPECT_EQ(layout.find("model.layers.3.mlp.down_proj.weight"), nullptr);  // no fourth block
  EXPECT_EQ(layout.find("model.layers.0.self_attn.q_proj.bias"), nullptr);  // a Llama without biases
  // Weight decay: matrices only.
  EXPECT_TRUE(q->decay);
  EXPECT_FALSE(layout.find("model.layers.0.input_layernorm.weight")->decay);
}

TEST(LlamaLayout, UntiedScheduleUsesTheHeadUnit) {
  const ParamLayout layout(small_llama(false));
  const UnitSchedule& s = layout.schedule();
  const ScheduleUses uses{3};
  ASSERT_EQ(s.size(), 2 * 3 + 4);
  EXPECT_EQ(s[uses.embed_forward()].unit, 0);
  EXPECT_EQ(s[uses.head_forward()].unit, 4);
  EXPECT_EQ(s[uses.head_backward()].unit, 4);
  EXPECT_EQ(s[uses.block_backward(0)].unit, 1);
  EXPECT_EQ(s[uses.embed_backward()].unit, 0);
  EXPECT_FALSE(s[uses.embed_backward()].reads_params);
  // The embedding's parameters are read once, by its forward; the head's stay for its backward.
  EXPECT_TRUE(s.last_param_read(uses.embed_forward()));
  EXPECT_TRUE(s.next_use_follows(uses.head_forward()));
  EXPECT_TRUE(s.completes_gradient(uses.embed_backward()));
}

TEST(LlamaLayout, TiedQwen2HasBiasesAndNoHeadUnit) {
  const LlamaConfig c = small_llama(true, LlamaFamily::kQwen2);
  const ParamLayout layout(c);
  ASSERT_EQ(layout.num_units(), c.n_layer + 1);
  EXPECT_EQ(layout.head_unit(), ParamLayout::kEmbeddingUnit);
  EXPECT_EQ(static_cast<int64_t>(layout.total_numel()), c.param_count());
  EXPECT_EQ(layout.find("lm_head.weight"), nullptr);
  const ParamInfo* qb = layout.find("model.layers.0.self_attn.q_proj.bias");
  const ParamInfo* kb = layout.find("model.layers.0.self_attn.k_proj.bias");
  const ParamInfo* vb = layout.find("model.layers.0.self_attn.v_proj.bias");
  ASSERT_TRUE(qb && kb && vb);
  EXPECT_EQ(kb->offset, qb->offset + qb->numel);
  EXPECT_EQ(vb->offset, kb->offset + kb->numel);
  EXPECT_EQ(layout.find("model.layers.0.self_attn.o_proj.bias"), nullptr);  // Qwen 2: none on o
  // Names are unique, and each found by find() as itself.
  std::set<std::string> names;
  for (const ParamInfo& p : layout.params()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_EQ(layout.find(p.name), &p);
  }
}

TEST(LlamaLayout, TensorInfoWithoutALayoutAgrees) {
  const LlamaConfig c = small_llama(false);
  const ParamLayout layout(c);
  for (int u = 0; u < layout.num_units(); ++u) {
    ASSERT_EQ(ParamLayout::unit_tensor_count(c, u), static_cast<int>(layout.unit_params(u).size()));
    for (int i = 0; i < ParamLayout::unit_tensor_count(c, u); ++i) {
      const ParamInfo p = ParamLayout::tensor_info(c, u, i);
      EXPECT_EQ(p.name, layout.param(u, i).name);
      EXPECT_EQ(p.shape, layout.param(u, i).shape);
    }
  }
}

TEST(LlamaLayout, InitialisesNormsToOneAndWeightsNormally) {
  LlamaConfig lc = small_llama(false);
  lc.attention_bias = true;  // biases on q, k, v and o
  const ModelConfig c = lc;
  const ParamLayout layout(c);
  for (const ParamInfo& p : layout.params()) {
    const InitRule r = init_rule(p, c);
    const bool norm = p.name.find("layernorm") != std::string::npos || p.name == "model.norm.weight";
    const bool bias = p.name.ends_with(".bias");
    if (norm) {
      EXPECT_EQ(r.kind, InitRule::Kind::kOnes) << p.name;
    } else if (bias) {
      EXPECT_EQ(r.kind, InitRule::Kind::kZeros) << p.name;
    } else {
      EXPECT_EQ(r.kind, InitRule::Kind::kNormal) << p.name;
      EXPECT_EQ(r.std, 0.02f) << p.name;  // initializer_range, o_proj and down_proj included
    }
  }
  EXPECT_NE(layout.find("model.layers.0.self_attn.o_proj.bias"), nullptr);
}

TEST(ModelConfig, ManifestFormRoundTrips) {
  const ModelConfig gpt2 = GPT2Config{2, 4, 64, 256, 128};
  EXPECT_EQ(ModelConfig::from_json(gpt2.to_json(), "m"), gpt2);
  EXPECT_FALSE(gpt2.to_json().contains("arch"));  // GPT-2's manifests are as they were
  LlamaConfig lc = small_llama(false);
  lc.rope_scaling = Llama3RopeScaling{8.0, 1.0, 4.0, 8};
  const ModelConfig llama = lc;
  const nlohmann::json j = llama.to_json();
  EXPECT_EQ(j.at("arch"), "llama");
  EXPECT_EQ(ModelConfig::from_json(j, "m"), llama);
  EXPECT_EQ(ModelConfig::from_json(ModelConfig(small_llama(true, LlamaFamily::kQwen2)).to_json(), "m").llama().family,
            LlamaFamily::kQwen2);
  nlohmann::json bad = j;
  bad["arch"] = "mamba";
  try {
    (void)ModelConfig::from_json(bad, "'m.json' model");
    FAIL() << "an unknown architecture was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'mamba'"), std::string::npos) << e.what();
  }
  bad = j;
  bad["num_key_value_heads"] = 3;
  EXPECT_THROW((void)ModelConfig::from_json(bad, "m"), UsageError);
}

}  // namespace
}  // namespace zerodp::model
