#include "model/model_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"

namespace zerodp::model {

const char* arch_name(Arch arch) { return arch == Arch::kGpt2 ? "gpt2" : "llama"; }

Arch parse_arch(std::string_view name, std::string_view where) {
  if (name == "gpt2") return Arch::kGpt2;
  if (name == "llama") return Arch::kLlama;
  throw UsageError(fmt::format("{}: architecture '{}' is not one zerodp builds (gpt2, llama)", where,
                               describe_text(name)));
}

const GPT2Config& ModelConfig::gpt2() const {
  ZDP_CHECK(is_gpt2(), "the GPT-2 config of a {}", summary());
  return std::get<GPT2Config>(config_);
}

const LlamaConfig& ModelConfig::llama() const {
  ZDP_CHECK(is_llama(), "the Llama config of GPT-2 {}", summary());
  return std::get<LlamaConfig>(config_);
}

int ModelConfig::n_layer() const {
  return std::visit([](const auto& c) { return c.n_layer; }, config_);
}
int ModelConfig::n_embd() const {
  return std::visit([](const auto& c) { return c.n_embd; }, config_);
}
int ModelConfig::n_head() const {
  return std::visit([](const auto& c) { return c.n_head; }, config_);
}
int ModelConfig::vocab_size() const {
  return std::visit([](const auto& c) { return c.vocab_size; }, config_);
}
int ModelConfig::n_ctx() const {
  return std::visit([](const auto& c) { return c.n_ctx; }, config_);
}

void ModelConfig::validate() const {
  std::visit([](const auto& c) { c.validate(); }, config_);
}

CheckedSize ModelConfig::checked_param_count() const {
  return std::visit([](const auto& c) { return c.checked_param_count(); }, config_);
}

CheckedSize ModelConfig::checked_activation_bound(int64_t B, int64_t T) const {
  // GPT-2's count is of a whole context (T ≤ n_ctx), the Llama family's of T tokens.
  const CheckedSize sequence =
      is_gpt2() ? gpt2().checked_sequence_activations() : llama().checked_sequence_activations(T);
  return CheckedSize(B) * sequence * 4;
}

std::string ModelConfig::summary() const {
  return std::visit([](const auto& c) { return c.summary(); }, config_);
}

std::string model_name(const ModelConfig& config) {
  return config.is_gpt2() ? "GPT-2 " + config.summary() : config.summary();
}

nlohmann::json ModelConfig::to_json() const {
  if (is_gpt2()) {
    const GPT2Config& c = gpt2();
    return {{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"vocab_size", c.vocab_size},
            {"n_ctx", c.n_ctx}};
  }
  nlohmann::json j = llama().to_hf_json("float32");
  j.erase("torch_dtype");  // the checkpoint's own dtype is the manifest's
  j["arch"] = "llama";
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, std::string_view where) {
  ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", where, describe_json(j));
  const Arch arch = j.contains("arch") ? parse_arch(j.at("arch").is_string() ? j.at("arch").get<std::string>()
                                                                             : describe_json(j.at("arch")),
                                                    where)
                                       : Arch::kGpt2;
  if (arch == Arch::kLlama) return LlamaConfig::from_hf_json(j, where);
  return GPT2Config::from_json_sizes(j, where);
}

ModelConfig ModelConfig::from_hf_json(const nlohmann::json& j, std::string_view source) {
  ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", source, describe_json(j));
  const auto type = j.find("model_type");
  if (type != j.end() && *type == "gpt2") return GPT2Config::from_hf_json(j, source);
  ZDP_REQUIRE(type != j.end() && type->is_string() && LlamaConfig::family_of(type->get<std::string>()),
              "{}: model_type is {}: zerodp reads 'gpt2', {} model directories", source,
              type != j.end() ? describe_json(*type) : std::string("missing"), LlamaConfig::model_types_text());
  return LlamaConfig::from_hf_json(j, source);
}

nlohmann::json ModelConfig::to_hf_json(std::string_view dtype_name) const {
  return is_gpt2() ? gpt2().to_hf_json(dtype_name) : llama().to_hf_json(dtype_name);
}

}  // namespace zerodp::model
