// `zerodp tokenize --sft`: instruction data in JSON Lines to a token file and its labels
// (data/instruction_data.h; docs/reference/files.md#instruction-data). A line is an example in one of
// TRL's formats, and a file may mix them:
//   {"prompt": P, "completion": C}: the tokenizer's document tokens (Llama 2's <s>), P's tokens, C's
//     tokens and the end-of-text token; the targets are C's tokens and the end-of-text token. P and C
//     are encoded apart, so the prompt's tokens never depend on the completion's.
//   {"messages": [{"role", "content"}, ...]}: the conversation rendered by the chat template of the
//     tokenizer_config.json beside the tokenizer.json (data/chat_template.h, add_generation_prompt
//     false) and encoded as transformers' apply_chat_template(messages, tokenize=True) encodes it:
//     encode(rendered), no document tokens (the template writes its own <|begin_of_text|>). The
//     targets are the assistant's tokens, those of apply_chat_template's return_assistant_tokens_mask
//     when the template has {% generation %} blocks, else each assistant message's content and the
//     end-of-turn token after it (data/chat_labels.h says how each is found).
// The first token of every example starts it and is never a target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace zerodp::data {

struct InstructionTokens {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> labels;  // kTargetLabel, kExampleStartLabel (data/instruction_data.h)
  size_t examples = 0;
  size_t conversations = 0;  // examples of {"messages"} lines
  size_t targets = 0;
};

// What the examples are made with besides the tokenizer: what the tokenizer_config.json beside the
// tokenizer.json says.
struct InstructionFormat {
  // The end-of-text token a completion ends with: the config's eos_token (a string or
  // {"content": ...}, which must be one token of the tokenizer), else the tokenizer's own; none when
  // there is neither (a {"prompt", "completion"} line is then a UsageError).
  std::optional<uint32_t> end_token;
  // The config ("'dir/tokenizer_config.json'" in messages; empty when there is none) and its JSON,
  // whose chat_template renders {"messages"} lines (parsed at the first one).
  std::string config_name;
  nlohmann::json config;
};

// Reads the tokenizer_config.json beside the tokenizer.json at `tokenizer_path`, if there is one.
InstructionFormat instruction_format(const Tokenizer& tok, const std::string& tokenizer_path);

// The examples of the JSON Lines files `paths`, in order (blank lines skipped). UsageError naming the
// file and line of a line that is not one of the formats, of messages that are not an array of
// {"role": string, "content": ...} objects (content a string, or what templates take besides: null,
// a list of parts, an object), and of a conversation the template refuses or that has no chat
// template to render it.
InstructionTokens tokenize_instructions(const Tokenizer& tok, const std::vector<std::string>& paths,
                                        const InstructionFormat& format);

// Writes `out` (a token file) and its labels file beside it, atomically each; UsageError when there
// is no example.
void write_instruction_files(const std::string& out, const InstructionTokens& t, int64_t vocab_size);

}  // namespace zerodp::data
