// `zerodp sample --model F [--tokenizer tokenizer.json] --prompt TEXT --tokens N [--temperature X]
// [--top-k K] [--seed S]`: the prompt encoded by the tokenizer (bytes without one), the continuation
// decoded and printed as it is drawn, ending at the tokenizer's end-of-text token. `--chat MESSAGE`
// instead: a user message rendered by the chat template of the tokenizer_config.json beside the
// tokenizer with the generation prompt (as transformers' apply_chat_template(...,
// add_generation_prompt=True)), the reply ending at the config's eos_token (the end of a turn).
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "ckpt/model_source.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/memory.h"
#include "data/chat_template.h"
#include "data/instruction_tokenize.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "train/evaluate.h"
#include "train/sample.h"

namespace zerodp::cli {
namespace {

std::string g_model, g_tokenizer, g_prompt = "\n", g_chat, g_system;
bool g_no_stop = false;
train::SampleOptions g_opts;

// The sampler holds every weight in fp32 and the activations of one full context. A model file can be
// valid (every tensor present, within docs/limits.md) and still need more than this machine has: say
// so (exit 2) before allocating any of it, rather than failing halfway through an allocation.
void check_fits_in_memory(const std::string& path) {
  const ckpt::ModelSource source = ckpt::ModelSource::open(path);  // validated in full; maps, reads nothing
  const model::ModelConfig& mc = source.config();
  const int ctx = train::sample_context(mc, g_opts);
  train::check_inference_memory(mc, 1, ctx, path, "sampling", "a shorter --context");
}

// --chat: the text the model continues, the user's message in the chat template with the generation
// prompt; the turn ends at the config's eos_token.
std::string chat_prompt(const data::Tokenizer& tok, std::optional<uint32_t>& end_of_turn) {
  ZDP_REQUIRE(!g_tokenizer.empty(), "--chat needs --tokenizer (its chat template is in the tokenizer_config.json "
                                    "beside the tokenizer.json)");
  const data::InstructionFormat format = data::instruction_format(tok, g_tokenizer);
  ZDP_REQUIRE(!format.config_name.empty(), "--chat: no chat template: there is no tokenizer_config.json beside '{}'",
              g_tokenizer);
  ZDP_REQUIRE(format.config.contains("chat_template"), "--chat: {} has no chat_template", format.config_name);
  const data::ChatTemplate chat = data::ChatTemplate::from_tokenizer_config(format.config, format.config_name);
  data::ChatRenderOptions options;
  options.add_generation_prompt = true;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!g_system.empty()) messages.push_back({{"role", "system"}, {"content", g_system}});
  messages.push_back({{"role", "user"}, {"content", g_chat}});
  end_of_turn = format.end_token;
  return chat.render(messages, options).text;
}

int run_sample() {
  check_fits_in_memory(g_model);
  const std::unique_ptr<data::Tokenizer> tokenizer =
      g_tokenizer.empty() ? data::byte_tokenizer() : data::load_tokenizer(g_tokenizer);
  std::optional<uint32_t> end_of_turn;
  if (!g_chat.empty()) g_prompt = chat_prompt(*tokenizer, end_of_turn);
  const std::vector<uint32_t> prompt = tokenizer->encode(g_prompt);
  train::SampleOptions opts = g_opts;
  opts.vocab_limit = tokenizer->vocab_size();
  if (!g_no_stop) opts.stop_token = end_of_turn ? end_of_turn : tokenizer->eos_id();
  // The text as it grows: the prompt and the tokens so far decoded together, and what is new printed.
  // Decoding a token alone would lose what depends on its neighbours (a SentencePiece-style decoder
  // strips the leading space of the first token it is given); a character split over two tokens is
  // whole once both are out.
  std::vector<uint32_t> ids = prompt;
  size_t printed = tokenizer->decode(ids).size();
  opts.on_token = [&](uint32_t id) {
    ids.push_back(id);
    const std::string text = tokenizer->decode(ids);
    if (text.size() <= printed) return;
    std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
    std::fflush(stdout);
    printed = text.size();
  };
  if (g_chat.empty()) {  // (a chat's prompt is the template's text around the message: not echoed)
    std::fwrite(g_prompt.data(), 1, g_prompt.size(), stdout);
    std::fflush(stdout);
  }
  train::generate(g_model, prompt, opts);
  std::fputc('\n', stdout);
  return 0;
}

void register_sample(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("sample", "Generate text from a trained model (GPT-2 safetensors or a model directory)");
  cmd->add_option("--model", g_model, "Model weights: a GPT-2 safetensors file or a Hugging Face model directory")
      ->required();
  cmd->add_option("--tokenizer", g_tokenizer,
                  "Hugging Face tokenizer.json (byte-level or SentencePiece-style BPE) that made the training tokens; without it, bytes "
                  "(V = 256)");
  cmd->add_option("--prompt", g_prompt, "Text to continue")->capture_default_str();
  cmd->add_option("--chat", g_chat,
                  "A user message instead of --prompt: rendered by the chat template of the tokenizer_config.json beside "
                  "--tokenizer with the assistant's generation prompt; the reply ends at the config's eos_token")
      ->excludes(cmd->get_option("--prompt"));
  cmd->add_option("--system", g_system, "With --chat: a system message before the user's")->needs("--chat");
  cmd->add_option("--tokens", g_opts.tokens, "Tokens to generate, at most")->capture_default_str();
  cmd->add_option("--temperature", g_opts.temperature, "Softmax temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", g_opts.top_k, "Sample among the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--seed", g_opts.seed, "Random seed")->capture_default_str();
  cmd->add_option("--context", g_opts.context, "Longest context the model sees, in tokens (0: the model's n_ctx)")
      ->capture_default_str();
  cmd->add_flag("--no-stop", g_no_stop, "Go on past the tokenizer's end-of-text token instead of stopping there");
  cmd->callback([&action] { action = run_sample; });
}
const CommandRegistration sample_registration(50, register_sample);

}  // namespace
}  // namespace zerodp::cli
