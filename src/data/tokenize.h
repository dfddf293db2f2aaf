// Byte-level tokenisation (contract §4): one token per byte of the text, its value (V = 256).
#pragma once

#include <cstddef>
#include <string>

namespace zerodp::data {

constexpr int kByteVocabSize = 256;

// Reads `text_path` and writes its bytes as uint16 tokens in llm.c's layout to `out_path`,
// atomically, streaming (memory stays small whatever the text's size). Returns the token count.
// An empty text is a UsageError (a token file may not be empty).
size_t tokenize_bytes(const std::string& text_path, const std::string& out_path);

}  // namespace zerodp::data
