#include "model/gpt2_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"

namespace zerodp::model {

void require_hyper_parameter(const char* key, int value, int64_t limit) {
  ZDP_REQUIRE(value > 0, "{} must be positive, got {}", key, value);
  ZDP_REQUIRE(value <= limit, "{} is {}, over the limit of {} (docs/limits.md)", key, value, limit);
}

int64_t hyper_parameter_limit(std::string_view key) {
  if (key == "n_layer") return GPT2Limits::kMaxLayers;
  if (key == "n_head") return GPT2Limits::kMaxHeads;
  if (key == "n_embd") return GPT2Limits::kMaxEmbd;
  if (key == "vocab_size") return GPT2Limits::kMaxVocab;
  if (key == "n_ctx") return GPT2Limits::kMaxCtx;
  return 0;
}

void GPT2Config::validate() const {
  require_hyper_parameter("n_layer", n_layer, GPT2Limits::kMaxLayers);
  require_hyper_parameter("n_head", n_head, GPT2Limits::kMaxHeads);
  require_hyper_parameter("n_embd", n_embd, GPT2Limits::kMaxEmbd);
  require_hyper_parameter("vocab_size", vocab_size, GPT2Limits::kMaxVocab);
  require_hyper_parameter("n_ctx", n_ctx, GPT2Limits::kMaxCtx);
  ZDP_REQUIRE(n_embd % n_head == 0, "n_embd ({}) must be divisible by n_head ({})", n_embd, n_head);
  const CheckedSize params = checked_param_count();
  ZDP_REQUIRE(params.within(GPT2Limits::kMaxParams), "GPT-2 {} has {} parameters, over the limit of 2^40 (docs/limits.md)",
              summary(), params.ok() ? fmt::format("{}", params.value()) : std::string("more than 2^63"));
  const CheckedSize acts = checked_sequence_activations();
  ZDP_REQUIRE(acts.within(GPT2Limits::kMaxSequenceActivations),
              "GPT-2 {} needs {} activation elements for one sequence of n_ctx tokens, over the limit of 2^50 "
              "(docs/limits.md)",
              summary(), acts.ok() ? fmt::format("{}", acts.value()) : std::string("more than 2^63"));
}

CheckedSize GPT2Config::checked_param_count() const {
  const CheckedSize L = n_layer, C = n_embd, V = vocab_size, N = n_ctx;
  // Per block: ln_1, ln_2 (4C), c_attn (3C² + 3C), attn c_proj (C² + C), c_fc (4C² + 4C), mlp c_proj (4C² + C).
  const CheckedSize block = CheckedSize(12) * C * C + CheckedSize(13) * C;
  // wte, wpe, ln_f.
  const CheckedSize embedding = (V + N + 2) * C;
  return embedding + L * block;
}

CheckedSize GPT2Config::checked_sequence_activations() const {
  const CheckedSize L = n_layer, H = n_head, C = n_embd, V = vocab_size, N = n_ctx;
  const CheckedSize probs = H * N * N;                          // one block's attention probabilities
  const CheckedSize block = N * (CheckedSize(16) * C + 4) + probs;  // saved set and output
  const CheckedSize head = N * (CheckedSize(2) * C + V + 3);    // ln_f, logits, losses
  const CheckedSize backward = CheckedSize(14) * N * C + probs;  // gradients of one block, attention scratch
  return L * block + head + backward + CheckedSize(2) * N;     // + the tokens
}

nlohmann::json GPT2Config::to_metadata() const {
  return {{"n_layer", std::to_string(n_layer)},
          {"n_head", std::to_string(n_head)},
          {"n_embd", std::to_string(n_embd)},
          {"vocab_size", std::to_string(vocab_size)},
          {"n_ctx", std::to_string(n_ctx)}};
}

std::string GPT2Config::summary() const {
  return fmt::format("L{} H{} C{} V{} N{}", n_layer, n_head, n_embd, vocab_size, n_ctx);
}

GPT2Config GPT2Config::from_json_sizes(const nlohmann::json& j, std::string_view where, const char* ctx_key) {
  ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", where, describe_json(j));
  GPT2Config c;
  const struct {
    const char* key;
    const char* limit_key;
    int* field;
  } sizes[] = {{"n_layer", "n_layer", &c.n_layer},          {"n_head", "n_head", &c.n_head},
               {"n_embd", "n_embd", &c.n_embd},             {"vocab_size", "vocab_size", &c.vocab_size},
               {ctx_key, "n_ctx", &c.n_ctx}};
  for (const auto& s : sizes) {
    const int64_t limit = hyper_parameter_limit(s.limit_key);
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

namespace {

// config.json's value of `key`, or nullptr when it is absent or null (transformers' default then).
const nlohmann::json* hf_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

GPT2Config GPT2Config::from_hf_json(const nlohmann::json& j, std::string_view source) {
  ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", source, describe_json(j));
  const nlohmann::json* type = hf_field(j, "model_type");
  ZDP_REQUIRE(type != nullptr && *type == "gpt2", "{}: model_type is {}, not 'gpt2'", source,
              type ? describe_json(*type) : std::string("missing"));
  GPT2Config c = from_json_sizes(j, source, "n_positions");
  // Older configs (the Hub's gpt2) carry n_ctx beside n_positions; transformers sizes wpe by n_positions.
  if (const nlohmann::json* ctx = hf_field(j, "n_ctx"))
    ZDP_REQUIRE(*ctx == c.n_ctx, "{}: n_ctx is {} and n_positions {}: wpe has n_positions rows, the two must agree",
                source, describe_json(*ctx), c.n_ctx);
  // What transformers would compute otherwise, each with its default when absent.
  if (const nlohmann::json* eps = hf_field(j, "layer_norm_epsilon"))
    ZDP_REQUIRE(eps->is_number() && eps->get<double>() == 1e-5,
                "{}: layer_norm_epsilon is {}: zerodp's GPT-2 LayerNorm uses 1e-5 (docs/reference/model.md#gpt2)",
                source, describe_json(*eps));
  if (const nlohmann::json* tie = hf_field(j, "tie_word_embeddings"))
    ZDP_REQUIRE(*tie == true,
                "{}: tie_word_embeddings is {}: zerodp's GPT-2 computes its logits with wte (a tied head); an "
                "untied GPT-2 is not read",
                source, describe_json(*tie));
  if (const nlohmann::json* act = hf_field(j, "activation_function"))
    ZDP_REQUIRE(*act == "gelu_new" || *act == "gelu_pytorch_tanh",
                "{}: activation_function is {}: zerodp's GPT-2 MLP uses GELU's tanh approximation ('gelu_new')",
                source, describe_json(*act));
  if (const nlohmann::json* inner = hf_field(j, "n_inner"))
    ZDP_REQUIRE(*inner == 4 * int64_t{c.n_embd}, "{}: n_inner is {}: zerodp's GPT-2 MLP is 4·n_embd = {} wide",
                source, describe_json(*inner), 4 * int64_t{c.n_embd});
  if (const nlohmann::json* scale = hf_field(j, "scale_attn_weights"))
    ZDP_REQUIRE(*scale == true, "{}: scale_attn_weights is {}: zerodp scales attention scores by 1/sqrt(C/H)",
                source, describe_json(*scale));
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "add_cross_attention"}) {
    if (const nlohmann::json* v = hf_field(j, key))
      ZDP_REQUIRE(*v == false, "{}: {} is {}: zerodp's GPT-2 has no such attention", source, key, describe_json(*v));
  }
  return c;
}

nlohmann::json GPT2Config::to_hf_json(std::string_view dtype_name) const {
  // The dropout rates are transformers' 0.1 unless written: 0 makes the model it loads in training
  // mode the function zerodp trained, which has no dropout.
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_layer", n_layer},
          {"n_head", n_head},
          {"n_embd", n_embd},
          {"vocab_size", vocab_size},
          {"n_positions", n_ctx},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true},
          {"attn_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"resid_pdrop", 0.0},
          {"initializer_range", 0.02},
          {"torch_dtype", std::string(dtype_name)}};
}

}  // namespace zerodp::model
