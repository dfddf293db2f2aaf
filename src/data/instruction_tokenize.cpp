#include "data/instruction_tokenize.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "data/instruction_data.h"
#include "data/token_writer.h"

namespace zerodp::data {

namespace {

const std::string& string_field(const nlohmann::json& doc, const char* key, const std::string& where) {
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

}  // namespace

uint32_t completion_end_token(const Tokenizer& tok, const std::string& tokenizer_path) {
  const std::filesystem::path config =
      std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!tokenizer_path.empty() && std::filesystem::is_regular_file(config, ec)) {
    const std::string where = fmt::format("'{}'", config.string());
    const MappedFile file(config.string());
    const nlohmann::json j =
        parse_json(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), where);
    const auto eos = j.is_object() ? j.find("eos_token") : j.end();
    if (j.is_object() && eos != j.end() && !eos->is_null()) {
      const nlohmann::json& text = eos->is_object() && eos->contains("content") ? (*eos)["content"] : *eos;
      ZDP_REQUIRE(text.is_string(), "{}: eos_token must be a string or {{\"content\": ...}}, got {}", where,
                  describe_json(*eos));
      const std::vector<uint32_t> ids = tok.encode(text.get_ref<const std::string&>());
      ZDP_REQUIRE(ids.size() == 1, "{}: eos_token {} is {} tokens of {}, not one", where, describe_json(text),
                  ids.size(), tok.describe());
      return ids[0];
    }
  }
  const std::optional<uint32_t> eos = tok.eos_id();
  ZDP_REQUIRE(eos.has_value(), "tokenize --sft: {} has no end-of-text token to end each completion with (give a "
                               "tokenizer_config.json with eos_token beside tokenizer.json)",
              tok.describe());
  return *eos;
}

InstructionTokens tokenize_instructions(const Tokenizer& tok, const std::vector<std::string>& paths,
                                        uint32_t end_token) {
  InstructionTokens t;
  std::vector<uint32_t> before, after;
  tok.document_tokens(before, after);
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
      const nlohmann::json doc = parse_json(s, where);
      ZDP_REQUIRE(doc.is_object(), "{}: must be a JSON object, {{\"prompt\", \"completion\"}} or {{\"messages\"}}, got {}",
                  where, describe_json(doc));
      ZDP_REQUIRE(!doc.contains("messages"),
                  "{}: \"messages\" needs the model's chat template, which zerodp tokenize does not render yet; give "
                  "{{\"prompt\", \"completion\"}} lines",
                  where);
      const std::string& prompt = string_field(doc, "prompt", where);
      const std::string& completion = string_field(doc, "completion", where);
      const size_t first = t.ids.size();
      append(t, before, 0);
      append(t, tok.encode(prompt), 0);
      append(t, tok.encode(completion), kTargetLabel);
      append(t, {end_token}, kTargetLabel);
      append(t, after, 0);
      // The example's first token is predicted from nothing: never a target, and marks the start.
      if (t.labels[first] & kTargetLabel) --t.targets;
      t.labels[first] = kExampleStartLabel;
      ++t.examples;
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
