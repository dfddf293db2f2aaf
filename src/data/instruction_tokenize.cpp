#include "data/instruction_tokenize.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "data/chat_labels.h"
#include "data/chat_template.h"
#include "data/instruction_data.h"
#include "data/token_writer.h"

namespace zerodp::data {

namespace {

using nlohmann::ordered_json;

constexpr size_t kMaxMessages = 10000;  // messages of one conversation
constexpr size_t kMaxRoleBytes = 256;

const std::string& string_field(const ordered_json& doc, const char* key, const std::string& where) {
  const auto it = doc.find(key);
  ZDP_REQUIRE(it != doc.end(), "{}: no \"{}\" key", where, key);
  ZDP_REQUIRE(it->is_string(), "{}: \"{}\" must be a string, got {}", where, key, describe_json(*it));
  return it->get_ref<const std::string&>();
}

// Appends `ids` with `label` on each.
void append(InstructionTokens& t, const std::vector<uint32_t>& ids, uint8_t label) {
  t.ids.insert(t.ids.end(), ids.begin(), ids.end());
  t.labels.insert(t.labels.end(), ids.size(), label);
  if (label & kTargetLabel) t.targets += ids.size();
}

// The example that starts at token `first` ends here: its first token is predicted from nothing, so
// it is never a target, and it marks the start.
void end_example(InstructionTokens& t, size_t first) {
  if (t.labels[first] & kTargetLabel) --t.targets;
  t.labels[first] = kExampleStartLabel;
  ++t.examples;
}

// A conversation's messages: an array of {"role": string, "content": ...} objects, within bounds.
void check_messages(const ordered_json& messages, const std::string& where) {
  ZDP_REQUIRE(messages.is_array() && !messages.empty(), "{}: \"messages\" must be a non-empty array, got {}", where,
              describe_json(messages));
  ZDP_REQUIRE(messages.size() <= kMaxMessages, "{}: {} messages, over the {} allowed", where, messages.size(),
              kMaxMessages);
  for (size_t m = 0; m < messages.size(); ++m) {
    const ordered_json& message = messages[m];
    ZDP_REQUIRE(message.is_object(), "{}: message {} must be an object {{\"role\", \"content\"}}, got {}", where, m,
                describe_json(message));
    const auto role = message.find("role");
    ZDP_REQUIRE(role != message.end() && role->is_string(), "{}: message {}: \"role\" must be a string, got {}", where,
                m, role == message.end() ? std::string("none") : describe_json(*role));
    ZDP_REQUIRE(
        !role->get_ref<const std::string&>().empty() && role->get_ref<const std::string&>().size() <= kMaxRoleBytes,
        "{}: message {}: \"role\" must have 1 to {} bytes, got {}", where, m, kMaxRoleBytes, describe_json(*role));
    const auto content = message.find("content");
    ZDP_REQUIRE(content != message.end(), "{}: message {} has no \"content\" key", where, m);
    ZDP_REQUIRE(content->is_string() || content->is_null() || content->is_array() || content->is_object(),
                "{}: message {}: \"content\" must be a string (or null, a list of parts, an object), got {}", where, m,
                describe_json(*content));
  }
}

// A {"messages": [...]} line, rendered and encoded as apply_chat_template does (instruction_tokenize.h).
void append_conversation(InstructionTokens& t, const Tokenizer& tok, const ChatTemplate& chat,
                         const ordered_json& messages, const std::string& where) {
  check_messages(messages, where);
  ChatRendered r;
  try {
    r = chat.render(messages);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", where, e.what()));
  }
  std::vector<uint32_t> ids;
  std::vector<TokenSpan> spans;
  tok.encode_with_spans(r.text, ids, spans);
  ZDP_REQUIRE(!ids.empty(), "{}: the chat template renders the messages to no text", where);
  const std::vector<TextRange> ranges =
      chat.has_generation() ? r.generation : assistant_turns(r.text, messages, ids, spans, tok, where);
  const std::vector<uint8_t> mask = assistant_mask(spans, ranges);
  const size_t first = t.ids.size();
  t.ids.insert(t.ids.end(), ids.begin(), ids.end());
  for (uint8_t target : mask) {
    t.labels.push_back(target ? kTargetLabel : 0);
    t.targets += target;
  }
  end_example(t, first);
  ++t.conversations;
}

}  // namespace

InstructionFormat instruction_format(const Tokenizer& tok, const std::string& tokenizer_path) {
  InstructionFormat format;
  const std::filesystem::path config =
      std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!tokenizer_path.empty() && std::filesystem::is_regular_file(config, ec)) {
    format.config_name = fmt::format("'{}'", config.string());
    const MappedFile file(config.string());
    format.config =
        parse_json(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), format.config_name);
    const nlohmann::json& j = format.config;
    const auto eos = j.is_object() ? j.find("eos_token") : j.end();
    if (j.is_object() && eos != j.end() && !eos->is_null()) {
      const nlohmann::json& text = eos->is_object() && eos->contains("content") ? (*eos)["content"] : *eos;
      ZDP_REQUIRE(text.is_string(), "{}: eos_token must be a string or {{\"content\": ...}}, got {}",
                  format.config_name, describe_json(*eos));
      const std::vector<uint32_t> ids = tok.encode(text.get_ref<const std::string&>());
      ZDP_REQUIRE(ids.size() == 1, "{}: eos_token {} is {} tokens of {}, not one", format.config_name,
                  describe_json(text), ids.size(), tok.describe());
      format.end_token = ids[0];
    }
  }
  if (!format.end_token) format.end_token = tok.eos_id();
  return format;
}

InstructionTokens tokenize_instructions(const Tokenizer& tok, const std::vector<std::string>& paths,
                                        const InstructionFormat& format) {
  InstructionTokens t;
  std::vector<uint32_t> before, after;
  tok.document_tokens(before, after);
  std::optional<ChatTemplate> chat;  // made at the first {"messages"} line
  for (const std::string& path : paths) {
    const MappedFile file(path);
    const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
    size_t line = 0;
    for (size_t b = 0; b < text.size();) {
      ++line;
      size_t e = text.find('\n', b);
      if (e == std::string_view::npos) e = text.size();
      const std::string_view s = text.substr(b, e - b);
      b = e + 1;
      if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // a blank line
      const std::string where = fmt::format("'{}' line {}", path, line);
      // ordered: a message's keys reach the template in the line's order, as Python's dicts do
      const ordered_json doc = parse_ordered_json(s, where);
      ZDP_REQUIRE(doc.is_object(), "{}: must be a JSON object, {{\"prompt\", \"completion\"}} or {{\"messages\"}}, got {}",
                  where, describe_json(doc));
      if (doc.contains("messages")) {
        ZDP_REQUIRE(!doc.contains("prompt") && !doc.contains("completion"),
                    "{}: \"messages\" goes without \"prompt\" and \"completion\" (one format a line)", where);
        for (const char* key : {"tools", "documents"})
          ZDP_REQUIRE(!doc.contains(key) || doc[key].is_null(),
                      "{}: \"{}\" is not supported: the conversation is rendered with {} = none", where, key, key);
        if (!chat) {
          ZDP_REQUIRE(format.config.is_object() && format.config.contains("chat_template") &&
                          !format.config["chat_template"].is_null(),
                      "{}: \"messages\" are rendered with the chat template of the tokenizer_config.json beside the "
                      "tokenizer.json, and {}",
                      where,
                      format.config_name.empty() ? std::string("there is none (give --tokenizer with one beside it)")
                                                 : format.config_name + " has no chat_template");
          chat.emplace(ChatTemplate::from_tokenizer_config(format.config, format.config_name));
        }
        append_conversation(t, tok, *chat, doc["messages"], where);
        continue;
      }
      const std::string& prompt = string_field(doc, "prompt", where);
      const std::string& completion = string_field(doc, "completion", where);
      ZDP_REQUIRE(format.end_token.has_value(),
                  "{}: {} has no end-of-text token to end the completion with (give a tokenizer_config.json with "
                  "eos_token beside tokenizer.json)",
                  where, tok.describe());
      const size_t first = t.ids.size();
      append(t, before, 0);
      append(t, tok.encode(prompt), 0);
      append(t, tok.encode(completion), kTargetLabel);
      append(t, {*format.end_token}, kTargetLabel);
      append(t, after, 0);
      end_example(t, first);
    }
  }
  return t;
}

void write_instruction_files(const std::string& out, const InstructionTokens& t, int64_t vocab_size) {
  ZDP_REQUIRE(t.examples > 0, "tokenize --sft: no example in the input (every line blank)");
  write_tokens(out, t.ids, vocab_size);
  write_labels_file(labels_path_for(out), t.labels);
}

}  // namespace zerodp::data
