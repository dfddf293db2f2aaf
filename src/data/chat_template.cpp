// data/chat_template.h: the public face of the chat template engine (chat_template_ast.h holds the
// parts): parsing once, reading tokenizer_config.json, and one render's variables.
#include "data/chat_template.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/chat_template_ast.h"

namespace zerodp::data {

ChatTemplate::ChatTemplate(std::string_view source, std::string name, const ChatLimits& limits)
    : name_(std::move(name)), limits_(limits) {
  const std::vector<chat::Token> tokens = chat::lex(source, name_, limits_);
  program_ = std::make_unique<chat::Program>(chat::parse(tokens, name_, limits_));
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

bool ChatTemplate::has_generation() const { return program_->has_generation; }

namespace {

// A special token of tokenizer_config.json: a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> token_text(const nlohmann::json& v, std::string_view where, std::string_view key) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw UsageError(fmt::format("{}: '{}' must be a string, an object with a string 'content', or null", where, key));
}

}  // namespace

ChatTemplate ChatTemplate::from_tokenizer_config(const nlohmann::json& config, std::string_view where,
                                                 std::string_view which, const ChatLimits& limits) {
  ZDP_REQUIRE(config.is_object(), "{}: a tokenizer_config.json must be a JSON object", where);
  const auto it = config.find("chat_template");
  ZDP_REQUIRE(it != config.end() && !it->is_null(), "{}: there is no 'chat_template'", where);
  std::string source, name;
  if (it->is_string()) {
    source = it->get<std::string>();
    name = fmt::format("{} chat_template", where);
  } else if (it->is_array()) {
    std::vector<std::string> names;
    for (const auto& entry : *it) {
      ZDP_REQUIRE(entry.is_object() && entry.contains("name") && entry["name"].is_string() && entry.contains("template") &&
                      entry["template"].is_string(),
                  "{}: each entry of the 'chat_template' list must be {{\"name\": string, \"template\": string}}", where);
      names.push_back(entry["name"].get<std::string>());
      if (names.back() == which) {
        source = entry["template"].get<std::string>();
        name = fmt::format("{} chat_template '{}'", where, which);
      }
    }
    ZDP_REQUIRE(!name.empty(), "{}: the 'chat_template' list has no template named '{}' (it has {})", where,
                std::string(which).substr(0, 60), fmt::join(names.begin(), names.begin() + std::min<size_t>(names.size(), 8), ", "));
  } else {
    throw UsageError(fmt::format("{}: 'chat_template' must be a string or a list of {{name, template}}", where));
  }
  ChatTemplate t(source, std::move(name), limits);
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto k = config.find(key);
    if (k == config.end()) continue;
    if (auto text = token_text(*k, where, key)) t.special_tokens_[key] = *text;
  }
  if (const auto extra = config.find("additional_special_tokens"); extra != config.end() && !extra->is_null()) {
    ZDP_REQUIRE(extra->is_array(), "{}: 'additional_special_tokens' must be a list", where);
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& tok : *extra)
      if (auto text = token_text(tok, where, "additional_special_tokens")) list.push_back(*text);
    if (!list.empty()) t.special_tokens_["additional_special_tokens"] = std::move(list);
  }
  return t;
}

ChatRendered ChatTemplate::render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options) const {
  ZDP_REQUIRE(messages.is_array(), "{}: the messages must be a JSON list", name_);
  ZDP_REQUIRE(options.variables.is_object(), "{}: the template variables must be a JSON object", name_);
  // As apply_chat_template: the special tokens, then messages, tools, documents,
  // add_generation_prompt, then the caller's variables over the special tokens.
  nlohmann::ordered_json variables = special_tokens_;
  variables["messages"] = messages;
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = options.add_generation_prompt;
  for (const auto& [k, v] : options.variables.items()) variables[k] = v;
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  return chat::evaluate(*program_, name_, limits_, variables, now);
}

std::string chat_strip(std::string_view s) { return chat::py_strip(s, nullptr, true, true); }

}  // namespace zerodp::data
