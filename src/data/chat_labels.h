// Which tokens of a rendered conversation are the assistant's, for `zerodp tokenize --sft`'s
// {"messages": [...]} lines (docs/reference/files.md#instruction-data). The text is what the chat
// template renders (data/chat_template.h), its tokens those of Tokenizer::encode_with_spans.
//
// Ranges of the text become tokens as transformers' apply_chat_template(...,
// return_assistant_tokens_mask=True) turns its generation blocks into assistant_masks
// (assistant_mask). Where the template has no {% generation %} blocks, the ranges are found in the
// text (assistant_turns): each assistant message's content and the end-of-turn token after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace zerodp::data {

using TextRange = std::pair<size_t, size_t>;  // bytes [first, second) of a text

// One byte a token, 1 where a range marks it, as transformers does for each generation block in
// order: the tokens from the one that holds the range's first byte to the one that holds its last
// byte (token_at, the library's char_to_token), to the last token when no token holds the last byte
// or when it is token 0 (transformers tests `if end_token`); when no token holds the first byte,
// that range and every later one mark nothing.
std::vector<uint8_t> assistant_mask(std::span<const TokenSpan> spans, std::span<const TextRange> ranges);

// The ranges of a template without generation blocks. Walking the messages in order with a cursor
// in `text` (from 0):
//   - a system message is passed over (templates move it: Mistral's into the last user turn);
//   - any other message that is not the assistant's moves the cursor past its content's first
//     occurrence at or after it, when its content (else the content stripped of whitespace at both
//     ends, as templates' `trim` does) is there;
//   - an assistant message's content must be a string. Its range starts at the first occurrence, at
//     or after the cursor, of the content (else of the content stripped) that ends a turn: followed,
//     after nothing but ASCII whitespace, by an added token of the tokenizer (the end-of-turn:
//     <|eot_id|>, <|im_end|>, </s>) that the end of the text or another added token follows in turn,
//     after nothing but ASCII whitespace; when no occurrence does (turns that start with plain text,
//     as Llama 2's "[INST]"), the first one that an added token follows. So the role in a header
//     ("<|start_header_id|>assistant<|end_header_id|>") is not taken for a content "assistant". The
//     range ends with the end-of-turn token, the whitespace before it included, and the cursor moves
//     past it. A content that is empty once stripped and not found as it is marks nothing (nothing
//     tells where it is); any other that is not found is a UsageError naming `where` and the message.
std::vector<TextRange> assistant_turns(std::string_view text, const nlohmann::ordered_json& messages,
                                       std::span<const uint32_t> ids, std::span<const TokenSpan> spans,
                                       const Tokenizer& tok, std::string_view where);

}  // namespace zerodp::data
