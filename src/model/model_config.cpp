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
  GPT2Config c;
  const struct {
    const char* key;
    int* field;
  } sizes[] = {{"n_layer", &c.n_layer}, {"n_head", &c.n_head}, {"n_embd", &c.n_embd},
               {"vocab_size", &c.vocab_size}, {"n_ctx", &c.n_ctx}};
  for (const auto& s : sizes) {
    const int64_t limit = hyper_parameter_limit(s.key);
    ZDP_REQUIRE(j.contains(s.key), "{}: no '{}'", where, s.key);
    const nlohmann::json& v = j.at(s.key);
    ZDP_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= limit,
                "{}: '{}' is {}, not an integer in [1, {}]", where, s.key, describe_json(v), limit);
    *s.field = static_cast<int>(v.get<int64_t>());
  }
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", where, e.what()));
  }
  return c;
}

}  // namespace zerodp::model
