#include "model/llama_config.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "model/gpt2_config.h"

namespace zerodp::model {

namespace {

// A config.json's fields, read with messages naming the file and the key.
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string_view source) : j_(j), source_(source) {
    ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", source, describe_json(j));
  }
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const nlohmann::json& at(const char* key) const {
    ZDP_REQUIRE(has(key), "{}: no '{}'", source_, key);
    return j_.at(key);
  }
  int integer(const char* key, int64_t limit) const { return integer_of(at(key), key, limit); }
  int integer_or(const char* key, int64_t limit, int fallback) const {
    return has(key) ? integer(key, limit) : fallback;
  }
  int integer_of(const nlohmann::json& v, const char* key, int64_t limit) const {
    ZDP_REQUIRE(v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= limit,
                "{}: '{}' is {}, not an integer in [1, {}]", source_, key, describe_json(v), limit);
    return static_cast<int>(v.get<int64_t>());
  }
  double number_of(const nlohmann::json& v, const char* key) const {
    ZDP_REQUIRE(v.is_number() && std::isfinite(v.get<double>()), "{}: '{}' is {}, not a finite number", source_,
                key, describe_json(v));
    return v.get<double>();
  }
  double number_or(const char* key, double fallback) const { return has(key) ? number_of(at(key), key) : fallback; }
  bool flag_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    ZDP_REQUIRE(at(key).is_boolean(), "{}: '{}' is {}, not true or false", source_, key, describe_json(at(key)));
    return at(key).get<bool>();
  }
  std::string text_or(const char* key, const char* fallback) const {
    if (!has(key)) return fallback;
    ZDP_REQUIRE(at(key).is_string(), "{}: '{}' is {}, not a string", source_, key, describe_json(at(key)));
    return at(key).get<std::string>();
  }
  std::string_view source() const { return source_; }

 private:
  const nlohmann::json& j_;
  std::string source_;
};

// Each family's Hugging Face model_type and architecture.
struct FamilyNames {
  LlamaFamily family;
  const char* model_type;
  const char* architecture;
};
constexpr FamilyNames kFamilies[] = {{LlamaFamily::kLlama, "llama", "LlamaForCausalLM"},
                                     {LlamaFamily::kQwen2, "qwen2", "Qwen2ForCausalLM"},
                                     {LlamaFamily::kQwen3, "qwen3", "Qwen3ForCausalLM"},
                                     {LlamaFamily::kMistral, "mistral", "MistralForCausalLM"}};

const FamilyNames& names_of(LlamaFamily family) {
  for (const FamilyNames& f : kFamilies)
    if (f.family == family) return f;
  return kFamilies[0];
}
const char* family_name(LlamaFamily family) { return names_of(family).model_type; }
const char* family_architecture(LlamaFamily family) { return names_of(family).architecture; }

// RoPE from rope_parameters (transformers 5: theta and the scaling in one object) or from rope_theta
// and rope_scaling (earlier versions).
void read_rope(const Fields& f, LlamaConfig& c) {
  const bool parameters = f.has("rope_parameters");
  const char* key = parameters ? "rope_parameters" : "rope_scaling";
  c.rope_theta = f.number_or("rope_theta", c.rope_theta);
  if (!f.has(key)) return;
  const Fields r(f.at(key), fmt::format("{} '{}'", f.source(), key));
  if (parameters) c.rope_theta = r.number_or("rope_theta", c.rope_theta);
  const std::string type = r.text_or("rope_type", r.text_or("type", "default").c_str());
  if (type == "default") return;
  ZDP_REQUIRE(type == "llama3", "{}: '{}' has rope_type '{}': zerodp computes 'default' and 'llama3' RoPE only",
              f.source(), key, describe_text(type));
  Llama3RopeScaling s;
  s.factor = r.number_of(r.at("factor"), "factor");
  s.low_freq_factor = r.number_of(r.at("low_freq_factor"), "low_freq_factor");
  s.high_freq_factor = r.number_of(r.at("high_freq_factor"), "high_freq_factor");
  s.original_max_position = r.integer("original_max_position_embeddings", LlamaLimits::kMaxCtx);
  c.rope_scaling = s;
}

}  // namespace

void LlamaConfig::validate() const {
  const struct {
    const char* key;
    int value;
    int64_t limit;
  } sizes[] = {{"num_hidden_layers", n_layer, LlamaLimits::kMaxLayers},
               {"num_attention_heads", n_head, LlamaLimits::kMaxHeads},
               {"num_key_value_heads", n_kv_head, LlamaLimits::kMaxHeads},
               {"hidden_size", n_embd, LlamaLimits::kMaxEmbd},
               {"head_dim", head_dim, LlamaLimits::kMaxHeadDim},
               {"intermediate_size", intermediate_size, LlamaLimits::kMaxIntermediate},
               {"vocab_size", vocab_size, LlamaLimits::kMaxVocab},
               {"max_position_embeddings", n_ctx, LlamaLimits::kMaxCtx}};
  for (const auto& s : sizes) require_hyper_parameter(s.key, s.value, s.limit);
  ZDP_REQUIRE(n_head % n_kv_head == 0, "num_key_value_heads ({}) must divide num_attention_heads ({})", n_kv_head,
              n_head);
  ZDP_REQUIRE(sliding_window >= 0 && sliding_window <= LlamaLimits::kMaxCtx,
              "sliding_window is {}, not in [0 (none), {}]", sliding_window, LlamaLimits::kMaxCtx);
  ZDP_REQUIRE(sliding_window == 0 || family == LlamaFamily::kMistral,
              "sliding_window is {}: only a Mistral config has one", sliding_window);
  ZDP_REQUIRE(!attention_bias || family != LlamaFamily::kMistral, "a Mistral config has no attention biases");
  ZDP_REQUIRE(head_dim % 2 == 0, "head_dim ({}) must be even: rotary embeddings turn pairs of values", head_dim);
  ZDP_REQUIRE(std::isfinite(rope_theta) && rope_theta > 1, "rope_theta is {}, not a number above 1", rope_theta);
  ZDP_REQUIRE(std::isfinite(rms_norm_eps) && rms_norm_eps >= 0 && rms_norm_eps < 1,
              "rms_norm_eps is {}, not a number in [0, 1)", rms_norm_eps);
  if (rope_scaling) {
    const Llama3RopeScaling& s = *rope_scaling;
    ZDP_REQUIRE(s.factor >= 1 && s.factor <= 1e6, "rope_scaling factor is {}, not in [1, 1e6]", s.factor);
    ZDP_REQUIRE(s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor && s.high_freq_factor <= 1e6,
                "rope_scaling needs 0 < low_freq_factor < high_freq_factor, got {} and {}", s.low_freq_factor,
                s.high_freq_factor);
    ZDP_REQUIRE(s.original_max_position >= 1 && s.original_max_position <= LlamaLimits::kMaxCtx,
                "rope_scaling original_max_position_embeddings is {}, not in [1, {}]", s.original_max_position,
                LlamaLimits::kMaxCtx);
  }
  const CheckedSize params = checked_param_count();
  ZDP_REQUIRE(params.within(LlamaLimits::kMaxParams), "{} has {} parameters, over the limit of 2^40 (docs/limits.md)",
              summary(), params.ok() ? fmt::format("{}", params.value()) : std::string("more than 2^63"));
}

CheckedSize LlamaConfig::checked_param_count() const {
  const CheckedSize L = n_layer, C = n_embd, V = vocab_size, I = intermediate_size;
  const CheckedSize q = CheckedSize(n_head) * head_dim, kv = CheckedSize(n_kv_head) * head_dim;
  CheckedSize block = CheckedSize(2) * C;          // input_layernorm, post_attention_layernorm
  block += C * (q + CheckedSize(2) * kv) + q * C;  // q, k, v, o projections
  if (qkv_bias()) block += q + CheckedSize(2) * kv;
  if (o_bias()) block += C;
  if (qk_norm()) block += CheckedSize(2) * head_dim;  // q_norm, k_norm
  block += CheckedSize(3) * C * I;                 // gate, up, down
  CheckedSize total = V * C + L * block + C;       // embed_tokens, the blocks, the final norm
  if (!tie_word_embeddings) total += V * C;        // lm_head
  return total;
}

CheckedSize LlamaConfig::checked_sequence_activations(int64_t T) const {
  const CheckedSize qkv = CheckedSize(n_head + 2 * n_kv_head) * head_dim;
  const CheckedSize per_token = CheckedSize(n_head) * T + CheckedSize(8) * n_embd + CheckedSize(3) * qkv +
                                CheckedSize(6) * intermediate_size;
  return CheckedSize(T) * ((CheckedSize(n_layer) + 1) * per_token + vocab_size + 8);
}

std::optional<LlamaFamily> LlamaConfig::family_of(std::string_view model_type) {
  for (const FamilyNames& f : kFamilies)
    if (model_type == f.model_type) return f.family;
  return std::nullopt;
}

std::string LlamaConfig::model_types_text() {
  std::string text;
  const size_t n = std::size(kFamilies);
  for (size_t i = 0; i < n; ++i)
    text += fmt::format("{}'{}'", i == 0 ? "" : i + 1 == n ? " and " : ", ", kFamilies[i].model_type);
  return text;
}

LlamaConfig LlamaConfig::from_hf_json(const nlohmann::json& j, std::string_view source) {
  const Fields f(j, source);
  LlamaConfig c;
  const std::optional<LlamaFamily> family = family_of(f.text_or("model_type", ""));
  ZDP_REQUIRE(family.has_value(), "{}: model_type is {}: zerodp reads {} configs", source,
              f.has("model_type") ? describe_json(f.at("model_type")) : std::string("missing"), model_types_text());
  c.family = *family;
  c.n_layer = f.integer("num_hidden_layers", LlamaLimits::kMaxLayers);
  c.n_head = f.integer("num_attention_heads", LlamaLimits::kMaxHeads);
  c.n_kv_head = f.integer_or("num_key_value_heads", LlamaLimits::kMaxHeads, c.n_head);
  c.n_embd = f.integer("hidden_size", LlamaLimits::kMaxEmbd);
  c.head_dim = f.integer_or("head_dim", LlamaLimits::kMaxHeadDim, c.n_embd / c.n_head);
  c.intermediate_size = f.integer("intermediate_size", LlamaLimits::kMaxIntermediate);
  c.vocab_size = f.integer("vocab_size", LlamaLimits::kMaxVocab);
  c.n_ctx = f.integer("max_position_embeddings", LlamaLimits::kMaxCtx);
  c.rms_norm_eps = f.number_or("rms_norm_eps", c.rms_norm_eps);
  c.tie_word_embeddings = f.flag_or("tie_word_embeddings", false);
  c.attention_bias = f.flag_or("attention_bias", false);
  read_rope(f, c);
  const std::string act = f.text_or("hidden_act", "silu");
  ZDP_REQUIRE(act == "silu", "{}: hidden_act is '{}': the Llama family's MLP here is SiLU-gated ('silu')", source,
              describe_text(act));
  ZDP_REQUIRE(!f.flag_or("mlp_bias", false), "{}: mlp_bias is true: zerodp's Llama MLP has no biases", source);
  if (c.family == LlamaFamily::kMistral) {
    // null or absent: full attention (Mistral 7B v0.2 on); else the window, at least one key.
    if (f.has("sliding_window") && !f.at("sliding_window").is_null())
      c.sliding_window = f.integer("sliding_window", LlamaLimits::kMaxCtx);
  } else {
    // Qwen's windows apply to some layers only (max_window_layers): not computed here.
    ZDP_REQUIRE(!f.flag_or("use_sliding_window", false),
                "{}: use_sliding_window is true: zerodp's {} attention is full causal attention", source,
                family_name(c.family));
  }
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
  return c;
}

nlohmann::json LlamaConfig::to_hf_json(std::string_view dtype_name) const {
  nlohmann::json j = {
      {"architectures", {family_architecture(family)}},
      {"model_type", family_name(family)},
      {"num_hidden_layers", n_layer},
      {"num_attention_heads", n_head},
      {"num_key_value_heads", n_kv_head},
      {"hidden_size", n_embd},
      {"head_dim", head_dim},
      {"intermediate_size", intermediate_size},
      {"vocab_size", vocab_size},
      {"max_position_embeddings", n_ctx},
      {"hidden_act", "silu"},
      {"rms_norm_eps", rms_norm_eps},
      {"rope_theta", rope_theta},
      {"tie_word_embeddings", tie_word_embeddings},
      {"torch_dtype", std::string(dtype_name)},
      {"initializer_range", 0.02},
  };
  if (family == LlamaFamily::kQwen2 || family == LlamaFamily::kQwen3) j["use_sliding_window"] = false;
  if (family == LlamaFamily::kMistral) {
    j["sliding_window"] = sliding_window > 0 ? nlohmann::json(sliding_window) : nlohmann::json(nullptr);
  } else if (family != LlamaFamily::kQwen2) {
    j["attention_bias"] = attention_bias;
  }
  if (family == LlamaFamily::kLlama) j["mlp_bias"] = false;
  if (rope_scaling) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", rope_scaling->factor},
                         {"low_freq_factor", rope_scaling->low_freq_factor},
                         {"high_freq_factor", rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling->original_max_position}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  return j;
}

std::string LlamaConfig::summary() const {
  return fmt::format("{} L{} H{}/{} C{} I{} V{} N{}{}", family_name(family), n_layer, n_head, n_kv_head, n_embd,
                     intermediate_size, vocab_size, n_ctx,
                     sliding_window > 0 ? fmt::format(" window {}", sliding_window) : "");
}

}  // namespace zerodp::model
