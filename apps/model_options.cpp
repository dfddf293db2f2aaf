#include "apps/model_options.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::cli {

void add_llama_options(CLI::App* cmd, LlamaOptions& o) {
  cmd->add_option("--kv-heads", o.kv_heads, "Llama: key/value heads (dividing --heads; default --heads)");
  cmd->add_option("--head-dim", o.head_dim, "Llama: values per head (default --embd / --heads)");
  cmd->add_option("--intermediate", o.intermediate, "Llama: the MLP's width (default 8C/3 rounded up to 32)");
  cmd->add_option("--rope-theta", o.rope_theta, "Llama: RoPE's base")->capture_default_str();
  cmd->add_flag("--tie", o.tie, "Llama: tie lm_head to embed_tokens (tie_word_embeddings)");
  cmd->add_flag("--qwen2", o.qwen2, "Llama: a Qwen2ForCausalLM (q/k/v biases)");
  cmd->add_flag("--attention-bias", o.attention_bias, "Llama: biases on q, k, v and o (attention_bias)");
}

bool any_llama_option(const LlamaOptions& o) {
  return o.kv_heads != 0 || o.head_dim != 0 || o.intermediate != 0 || o.rope_theta != LlamaOptions{}.rope_theta ||
         o.tie || o.qwen2 || o.attention_bias;
}

std::string llama_flags(const LlamaOptions& o) {
  std::string f = fmt::format("--rope-theta {}", o.rope_theta);
  if (o.kv_heads) f += fmt::format(" --kv-heads {}", o.kv_heads);
  if (o.head_dim) f += fmt::format(" --head-dim {}", o.head_dim);
  if (o.intermediate) f += fmt::format(" --intermediate {}", o.intermediate);
  if (o.tie) f += " --tie";
  if (o.qwen2) f += " --qwen2";
  if (o.attention_bias) f += " --attention-bias";
  return f;
}

model::LlamaConfig llama_config(int layers, int heads, int embd, int vocab, int ctx, const LlamaOptions& o) {
  ZDP_REQUIRE(heads > 0 && embd > 0, "--heads and --embd must be positive, got {} and {}", heads, embd);
  ZDP_REQUIRE(o.head_dim > 0 || embd % heads == 0, "--embd {} is not divisible by --heads {}: give --head-dim", embd,
              heads);
  model::LlamaConfig c;
  c.family = o.qwen2 ? model::LlamaFamily::kQwen2 : model::LlamaFamily::kLlama;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_kv_head = o.kv_heads > 0 ? o.kv_heads : heads;
  c.n_embd = embd;
  c.head_dim = o.head_dim > 0 ? o.head_dim : embd / heads;
  c.intermediate_size = o.intermediate > 0 ? o.intermediate : model::LlamaConfig::default_intermediate_size(embd);
  c.vocab_size = vocab;
  c.n_ctx = ctx;
  c.rope_theta = o.rope_theta;
  c.tie_word_embeddings = o.tie;
  c.attention_bias = o.attention_bias;
  c.validate();  // within LlamaLimits
  return c;
}

}  // namespace zerodp::cli
