#include "model/layout.h"

#include <array>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace zerodp::model {

namespace {

// ---- GPT-2 ----------------------------------------------------------------------------------------
// The names of docs/reference/model.md#tensors, in unit order, without the "h.{i}." of block tensors.
constexpr std::array<std::string_view, kNumEmbedParams> kEmbedNames = {"wte.weight", "wpe.weight", "ln_f.weight",
                                                                        "ln_f.bias"};
constexpr std::array<std::string_view, kNumBlockParams> kBlockNames = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

Shape gpt2_embed_shape(const GPT2Config& c, int index) {
  const int64_t C = c.n_embd;
  switch (index) {
    case kWte: return {c.vocab_size, C};
    case kWpe: return {c.n_ctx, C};
    default: return {C};  // ln_f
  }
}

Shape gpt2_block_shape(const GPT2Config& c, int index) {
  const int64_t C = c.n_embd;
  switch (index) {
    case kAttnW: return {C, 3 * C};
    case kAttnB: return {3 * C};
    case kAttnProjW: return {C, C};
    case kFcW: return {C, 4 * C};
    case kFcB: return {4 * C};
    case kFcProjW: return {4 * C, C};
    default: return {C};  // LayerNorms, c_proj biases
  }
}

void gpt2_tensor(const GPT2Config& c, int unit, int index, ParamInfo& p) {
  const size_t i = static_cast<size_t>(index);
  if (unit == ParamLayout::kEmbeddingUnit) {
    p.name = std::string(kEmbedNames[i]);
    p.shape = gpt2_embed_shape(c, index);
  } else {
    p.name = fmt::format("h.{}.{}", unit - 1, kBlockNames[i]);
    p.shape = gpt2_block_shape(c, index);
  }
}

// ---- Llama ----------------------------------------------------------------------------------------
struct NamedShape {
  std::string_view name;
  Shape shape;
};

// A block's tensors in unit order (names without "model.layers.{i}.").
std::vector<NamedShape> llama_block(const LlamaConfig& c) {
  const int64_t C = c.n_embd, q = int64_t{c.n_head} * c.head_dim, kv = int64_t{c.n_kv_head} * c.head_dim;
  const int64_t I = c.intermediate_size;
  std::vector<NamedShape> t = {{"input_layernorm.weight", {C}},
                               {"self_attn.q_proj.weight", {q, C}},
                               {"self_attn.k_proj.weight", {kv, C}},
                               {"self_attn.v_proj.weight", {kv, C}}};
  if (c.qkv_bias()) {
    t.push_back({"self_attn.q_proj.bias", {q}});
    t.push_back({"self_attn.k_proj.bias", {kv}});
    t.push_back({"self_attn.v_proj.bias", {kv}});
  }
  t.push_back({"self_attn.o_proj.weight", {C, q}});
  if (c.o_bias()) t.push_back({"self_attn.o_proj.bias", {C}});
  if (c.qk_norm()) {
    t.push_back({"self_attn.q_norm.weight", {c.head_dim}});
    t.push_back({"self_attn.k_norm.weight", {c.head_dim}});
  }
  t.push_back({"post_attention_layernorm.weight", {C}});
  t.push_back({"mlp.gate_proj.weight", {I, C}});
  t.push_back({"mlp.up_proj.weight", {I, C}});
  t.push_back({"mlp.down_proj.weight", {C, I}});
  return t;
}

// The embedding unit (and the head's unit when untied).
std::vector<NamedShape> llama_outer(const LlamaConfig& c, bool head) {
  const int64_t C = c.n_embd, V = c.vocab_size;
  if (c.tie_word_embeddings) return {{"model.embed_tokens.weight", {V, C}}, {"model.norm.weight", {C}}};
  if (head) return {{"model.norm.weight", {C}}, {"lm_head.weight", {V, C}}};
  return {{"model.embed_tokens.weight", {V, C}}};
}

void llama_tensor(const LlamaConfig& c, int unit, int index, ParamInfo& p) {
  const size_t i = static_cast<size_t>(index);
  if (unit >= 1 && unit <= c.n_layer) {
    const std::vector<NamedShape> t = llama_block(c);
    p.name = fmt::format("model.layers.{}.{}", unit - 1, t.at(i).name);
    p.shape = t.at(i).shape;
  } else {
    const std::vector<NamedShape> t = llama_outer(c, unit != ParamLayout::kEmbeddingUnit);
    p.name = std::string(t.at(i).name);
    p.shape = t.at(i).shape;
  }
}

}  // namespace

int ParamLayout::units_of(const ModelConfig& c) { return c.n_layer() + (c.untied_head() ? 2 : 1); }

int ParamLayout::unit_tensor_count(const ModelConfig& c, int unit) {
  ZDP_CHECK(unit >= 0 && unit < units_of(c), "unit {} of {}", unit, c.summary());
  const bool block = unit >= 1 && unit <= c.n_layer();
  if (c.is_gpt2()) return block ? static_cast<int>(kNumBlockParams) : static_cast<int>(kNumEmbedParams);
  const LlamaConfig& l = c.llama();
  return static_cast<int>(block ? llama_block(l).size() : llama_outer(l, unit != kEmbeddingUnit).size());
}

ParamInfo ParamLayout::tensor_info(const ModelConfig& c, int unit, int index) {
  ZDP_CHECK(index >= 0 && index < unit_tensor_count(c, unit), "tensor {} of unit {}", index, unit);
  ParamInfo p;
  if (c.is_gpt2()) {
    gpt2_tensor(c.gpt2(), unit, index, p);
  } else {
    llama_tensor(c.llama(), unit, index, p);
  }
  p.unit = unit;
  p.numel = static_cast<size_t>(shape_numel(p.shape));
  p.decay = p.shape.size() >= 2;
  p.matrix = p.shape.size() == 2 && unit >= 1 && unit <= c.n_layer();
  return p;
}

ParamLayout::ParamLayout(const ModelConfig& c) : config_(c) {
  c.validate();  // within the architecture's limits: every size below fits, with room
  const int units = units_of(c);
  for (int unit = 0; unit < units; ++unit) {
    unit_first_.push_back(params_.size());
    size_t offset = 0;
    const int count = unit_tensor_count(c, unit);
    for (int index = 0; index < count; ++index) {
      ParamInfo p = tensor_info(c, unit, index);
      p.offset = offset;
      offset += p.numel;
      params_.push_back(std::move(p));
    }
    unit_numel_.push_back(offset);
    total_numel_ += offset;
  }
  by_name_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) by_name_.emplace(params_[i].name, i);
  schedule_ = model_schedule(c.n_layer(), c.untied_head());
}

UnitSchedule model_schedule(int n_layer, bool untied_head) {
  const int L = n_layer;
  const int embed = ParamLayout::kEmbeddingUnit, head = untied_head ? L + 1 : embed;
  std::vector<UnitUse> uses;
  uses.reserve(2 * static_cast<size_t>(L) + 4);
  uses.push_back({embed, Pass::kForward, true, "embed"});
  for (int l = 0; l < L; ++l) uses.push_back({ParamLayout::block_unit(l), Pass::kForward, true, "block"});
  uses.push_back({head, Pass::kForward, true, "head"});
  uses.push_back({head, Pass::kBackward, true, "head"});
  for (int l = L - 1; l >= 0; --l) uses.push_back({ParamLayout::block_unit(l), Pass::kBackward, true, "block"});
  uses.push_back({embed, Pass::kBackward, false, "embed"});
  return UnitSchedule(std::move(uses), untied_head ? L + 2 : L + 1);
}

std::vector<const ParamInfo*> ParamLayout::unit_params(int unit) const {
  const size_t first = unit_first_.at(static_cast<size_t>(unit));
  const size_t last = unit + 1 < num_units() ? unit_first_[static_cast<size_t>(unit) + 1] : params_.size();
  std::vector<const ParamInfo*> out;
  for (size_t i = first; i < last; ++i) out.push_back(&params_[i]);
  return out;
}

std::string ParamLayout::unit_contents(int unit) const {
  auto short_name = [](std::string_view name) {
    if (name.starts_with("model.")) name.remove_prefix(6);
    return name;
  };
  const std::vector<const ParamInfo*> tensors = unit_params(unit);
  if (unit != kEmbeddingUnit && unit != head_unit()) {  // a block: "<prefix>.<layer>" of its first tensor
    const std::string_view first = short_name(tensors.front()->name);
    const size_t layer_end = first.find('.', first.find_first_of("0123456789"));
    return std::string(first.substr(0, layer_end));
  }
  std::vector<std::string_view> names;
  for (const ParamInfo* p : tensors) {
    std::string_view n = short_name(p->name);
    for (std::string_view suffix : {".weight", ".bias"})
      if (n.ends_with(suffix)) n.remove_suffix(suffix.size());
    if (names.empty() || names.back() != n) names.push_back(n);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

const ParamInfo* ParamLayout::find(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &params_[it->second];
}

const ParamInfo& ParamLayout::param(int unit, int index) const {
  return params_.at(unit_first_.at(static_cast<size_t>(unit)) + static_cast<size_t>(index));
}

}  // namespace zerodp::model
