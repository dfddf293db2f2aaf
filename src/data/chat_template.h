// Chat templates (docs/design.md, "Chat templates"): the Jinja subset that the `chat_template` of a
// Hugging Face `tokenizer_config.json` is written in, rendered as `transformers`'
// `apply_chat_template(messages, tokenize=False, ...)` renders it (Jinja2 with trim_blocks and
// lstrip_blocks, its `tojson`, `raise_exception` and `strftime_now`, loop controls and the
// `{% generation %}` tag), together with the byte ranges of the generation blocks, which are where
// `return_assistant_tokens_mask` puts its ones.
//
// The language: `{{ }}`, `{% %}` and `{# #}` with `-`/`+` whitespace control; if/elif/else,
// for/else (tuple targets, an `if` filter, `loop.*`, break/continue), set (names, tuples,
// `ns.attr`, blocks), macros, `generation`, `raw`; Python expressions on JSON values (strings,
// numbers, booleans, none, lists, dicts) with slices, `in`, `is` tests, `|` filters and the string
// and dict methods templates call (strip, split, startswith, items, get, ...). Strings are UTF-8;
// lengths, indices and slices count code points as Python does; case mapping is ASCII only.
//
// A template is outside input: parsing and rendering are bounded (source size, nesting, loop
// iterations, output bytes, macro recursion), and every error is a UsageError naming the template
// and the line and column where it happened, never echoing a whole value.
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerodp::data {

namespace chat {
struct Program;  // the parsed template (chat_template_ast.h)
}

// Bounds on one render (and on the source when parsing).
struct ChatLimits {
  size_t max_source_bytes = size_t{1} << 20;   // the template text
  int max_nesting = 200;                       // blocks and expressions inside each other
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string value
  size_t max_iterations = size_t{1} << 22;     // loop iterations of one render, all loops together
  int max_call_depth = 64;                     // macro calls inside each other
};

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  // Further variables (a JSON object), as apply_chat_template's **kwargs: enable_thinking,
  // date_string, ... They override the special tokens of the same name.
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  // What strftime_now() formats (local time); now when unset. Tests set it.
  std::optional<std::tm> now;
};

struct ChatRendered {
  std::string text;
  // The byte range [begin, end) of each generation block of `text`, in rendering order, as
  // transformers' generation_indices gives them (which are in characters): a block rendered before
  // any output is not recorded, and a block inside a macro or a set block counts from the text
  // output so far, as Jinja's does.
  std::vector<std::pair<size_t, size_t>> generation;
};

class ChatTemplate {
 public:
  // Parses `source`; `name` says which template in errors ("tokenizer_config.json chat_template").
  // A syntax error is a UsageError naming `name`, the line and column.
  ChatTemplate(std::string_view source, std::string name, const ChatLimits& limits = {});
  // The template of a parsed tokenizer_config.json: `chat_template` is a string, or a list of
  // {"name", "template"} of which `which` (default "default") is taken. Its special tokens
  // (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: strings or
  // AddedToken objects {"content": ...}; additional_special_tokens) become template variables, as
  // transformers' special_tokens_map does. `where` names the file in errors.
  static ChatTemplate from_tokenizer_config(const nlohmann::json& config, std::string_view where,
                                            std::string_view which = "default", const ChatLimits& limits = {});
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders `messages` (a JSON array of {"role", "content", ...} objects) with tools = none and
  // documents = none. Thread-safe: a ChatTemplate is immutable once made.
  ChatRendered render(const nlohmann::ordered_json& messages, const ChatRenderOptions& options = {}) const;

  // Whether the template has a {% generation %} block.
  bool has_generation() const;
  // The special tokens taken from tokenizer_config.json (an object, maybe empty).
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  ChatLimits limits_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
  std::unique_ptr<chat::Program> program_;
};

// Python's str.strip() with no argument, which Jinja's `trim` filter is: `s` without the whitespace
// (str.isspace) at its ends. What templates that trim a message write of its content.
std::string chat_strip(std::string_view s);

}  // namespace zerodp::data
