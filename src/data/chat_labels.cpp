#include "data/chat_labels.h"

#include <optional>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "data/chat_template.h"

namespace zerodp::data {

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The added tokens of a text by the byte their span starts at (the first such token of each).
class AddedTokens {
 public:
  AddedTokens(std::string_view text, std::span<const uint32_t> ids, std::span<const TokenSpan> spans,
              const Tokenizer& tok)
      : text_(text), spans_(spans) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (spans[i].end > spans[i].begin && tok.is_added_token(ids[i])) at_.emplace(spans[i].begin, i);
  }
  // The added token where the ASCII whitespace from byte `at` ends: its index.
  std::optional<size_t> after(size_t at) const {
    while (at < text_.size() && ascii_space(text_[at])) ++at;
    const auto it = at_.find(at);
    return it == at_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }
  // Whether only ASCII whitespace is between byte `at` and the end of the text or an added token.
  bool turn_boundary(size_t at) const {
    while (at < text_.size() && ascii_space(text_[at])) ++at;
    return at == text_.size() || at_.count(at) > 0;
  }
  const TokenSpan& span(size_t i) const { return spans_[i]; }

 private:
  std::string_view text_;
  std::span<const TokenSpan> spans_;
  std::unordered_map<size_t, size_t> at_;
};

// The first occurrence of `form` at or after `cursor` that an added token follows (and, `strict`,
// one that a turn boundary follows in turn): the range to the end of that token.
std::optional<TextRange> find_turn(std::string_view text, std::string_view form, size_t cursor,
                                   const AddedTokens& added, bool strict) {
  for (size_t at = text.find(form, cursor); at != std::string_view::npos; at = text.find(form, at + 1)) {
    const std::optional<size_t> eot = added.after(at + form.size());
    if (eot && (!strict || added.turn_boundary(added.span(*eot).end))) return TextRange{at, added.span(*eot).end};
  }
  return std::nullopt;
}

// The content and, when it differs, the content stripped: what a template writes of it.
std::vector<std::string> written_forms(const std::string& content) {
  std::vector<std::string> forms{content};
  std::string stripped = chat_strip(content);
  if (stripped != content) forms.push_back(std::move(stripped));
  return forms;
}

}  // namespace

std::vector<uint8_t> assistant_mask(std::span<const TokenSpan> spans, std::span<const TextRange> ranges) {
  std::vector<uint8_t> mask(spans.size(), 0);
  for (const auto& [begin, end] : ranges) {
    const std::optional<size_t> first = token_at(spans, begin);
    if (!first) break;  // (transformers: "out of bounds maybe due to truncation")
    const std::optional<size_t> last = end > 0 ? token_at(spans, end - 1) : std::nullopt;
    const size_t stop = last && *last != 0 ? *last + 1 : spans.size();
    for (size_t i = *first; i < stop; ++i) mask[i] = 1;
  }
  return mask;
}

std::vector<TextRange> assistant_turns(std::string_view text, const nlohmann::ordered_json& messages,
                                       std::span<const uint32_t> ids, std::span<const TokenSpan> spans,
                                       const Tokenizer& tok, std::string_view where) {
  std::vector<TextRange> ranges;
  const AddedTokens added(text, ids, spans, tok);
  size_t cursor = 0;
  for (size_t m = 0; m < messages.size(); ++m) {
    const nlohmann::ordered_json& message = messages[m];
    const std::string& role = message.at("role").get_ref<const std::string&>();
    const auto content = message.find("content");
    const bool text_content = content != message.end() && content->is_string();
    if (role == "system") continue;
    if (role != "assistant") {
      for (const std::string& form :
           text_content ? written_forms(content->get_ref<const std::string&>()) : std::vector<std::string>{}) {
        const size_t at = form.empty() ? std::string_view::npos : text.find(form, cursor);
        if (at == std::string_view::npos) continue;
        cursor = at + form.size();
        break;
      }
      continue;
    }
    ZDP_REQUIRE(text_content,
                "{}: message {} (assistant): the chat template has no {{% generation %}} blocks, so the assistant's "
                "tokens are found by its content, which must be a string; got {}",
                where, m, content == message.end() ? std::string("none") : describe_json(*content));
    const std::vector<std::string> forms = written_forms(content->get_ref<const std::string&>());
    std::optional<TextRange> turn;
    for (const bool strict : {true, false})
      for (size_t f = 0; f < forms.size() && !turn; ++f)
        if (!forms[f].empty()) turn = find_turn(text, forms[f], cursor, added, strict);
    if (turn) {
      ranges.push_back(*turn);
      cursor = turn->second;
    }
    ZDP_REQUIRE(turn || forms.back().empty(),  // (the stripped form is last)
                "{}: message {} (assistant): its content {} is not in the rendered conversation followed by an "
                "end-of-turn token (an added token of the tokenizer); a chat template with {{% generation %}} "
                "blocks says which tokens to train on",
                where, m, describe_json(*content));
  }
  return ranges;
}

}  // namespace zerodp::data
