// Tokenizers (docs/reference/files.md#tokenizer-json): text to token ids and back. Two kinds behind
// one interface:
//   - bytes: one token per byte, its value (V = 256), what `zerodp tokenize` does without --tokenizer;
//   - byte-level BPE read from a Hugging Face `tokenizer.json` (GPT-2, Llama 3, Qwen 2, SmolLM, OLMo):
//     its ids are those of the `tokenizers` library's encode(text, add_special_tokens=False).
// A Tokenizer is immutable once loaded and safe to share between threads (encode may be called from
// many threads at once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zerodp::data {

// The bytes [begin, end) of a text that one of its tokens stands for (Tokenizer::encode_with_spans).
struct TokenSpan {
  size_t begin = 0, end = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` (any bytes; a BPE tokenizer expects UTF-8 and treats invalid sequences
  // as the library does) to `out`. Special and added tokens written literally in the text are
  // recognised as `tokenizers` does.
  virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
  std::vector<uint32_t> encode(std::string_view text) const {
    std::vector<uint32_t> out;
    encode(text, out);
    return out;
  }
  // Appends the ids of `text`, exactly those of encode(), and for each the span of `text` it stands
  // for: the `tokenizers` library's offsets (encode(text).offsets), counted in bytes instead of
  // characters. A span covers whole characters: every token made of some bytes of a character covers
  // all of it (byte-level pieces and <0xAB> byte-fallback tokens), so several tokens may share one;
  // a space or "▁" that the tokenizer puts before a text (Metaspace, Prepend, add_prefix_space) is
  // the first character's; an added token's span is what it matched, the spaces lstrip and rstrip
  // take included; a post-processor's ByteLevel trim_offsets takes the spaces off the spans' ends.
  // Where a normalizer changes the text, each token covers the characters that the changed stretch
  // came from (the library maps them one by one). The byte tokenizer's spans are its bytes. Slower
  // than encode(): for the few texts that need the spans.
  virtual void encode_with_spans(std::string_view text, std::vector<uint32_t>& ids,
                                 std::vector<TokenSpan>& spans) const = 0;
  // Whether `id` is one of the tokenizer's added tokens (tokenizer.json's added_tokens, special or not).
  virtual bool is_added_token(uint32_t) const { return false; }
  // The bytes of `ids` (decode(encode(x)) == x). An id >= vocab_size() is a UsageError naming it.
  virtual std::string decode(std::span<const uint32_t> ids) const = 0;

  // One more than the largest id (added and special tokens included).
  virtual int64_t vocab_size() const = 0;
  // The end-of-text token (GPT-2's <|endoftext|>, Llama 3's <|begin_of_text|>, Llama 2's </s>), if
  // the tokenizer has one: where `zerodp sample` stops.
  virtual std::optional<uint32_t> eos_id() const = 0;
  // The ids `zerodp tokenize` writes before and after each document: the special tokens of the
  // tokenizer's post-processor template (Llama 2's <s> before), else the end-of-text token before.
  virtual void document_tokens(std::vector<uint32_t>& before, std::vector<uint32_t>& after) const {
    before.clear();
    after.clear();
    if (const std::optional<uint32_t> eos = eos_id()) before.push_back(*eos);
  }
  // "bytes (V = 256)" or "BPE 'path' (V = 50257, GPT-2 pattern)" for logs.
  virtual std::string describe() const = 0;
};

// The first token whose span holds byte `at`: the library's char_to_token (first in token order),
// with the character that starts at byte `at`; none when no span holds it.
std::optional<size_t> token_at(std::span<const TokenSpan> spans, size_t at);

// The byte tokenizer (V = 256; no end-of-text token).
std::unique_ptr<Tokenizer> byte_tokenizer();
// Reads a Hugging Face tokenizer.json (bounded and validated: a malformed file is a UsageError naming
// the file and the key).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace zerodp::data
