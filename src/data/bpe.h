// BPE (docs/reference/files.md#tokenizer-json): the tokenizer of a Hugging Face `tokenizer.json`,
// byte-level (GPT-2, Llama 3, Qwen 2 and 2.5, SmolLM, OLMo) or SentencePiece-style (Llama 2, Mistral,
// TinyLlama), with the ids of the `tokenizers` library's encode(text, add_special_tokens=False).
//
// Encoding a text, as `tokenizers` does it:
//   1. added tokens (`added_tokens`, special or not) written literally in the text are found first,
//      leftmost-longest, honouring their single_word / lstrip / rstrip flags; tokens that are not
//      `normalized` are split out first, the others then in the remaining pieces, normalized, by
//      their normalized contents. Each added token is its id;
//   2. every other piece is normalized (normalizer.h: NFC, NFKC, Replace, Prepend, ...) and
//      pre-tokenized: the pre-tokenizer's steps in order (Split by a regex or a string with its
//      behaviour and `invert`, Digits, ByteLevel with GPT-2's regex when use_regex, the prefix space
//      when add_prefix_space), or Metaspace (' ' to "▁", the prefix "▁" by its prepend_scheme, a
//      split before each "▁" when split). Regexes run in PCRE2 (UTF, UCP, JIT);
//   3. each pre-token is merged by BPE, lowest merge rank first, leftmost first among equal ranks;
//      with ignore_merges a pre-token that is itself in the vocabulary is that token. In a byte-level
//      vocabulary the first symbols are the pre-token's bytes (as GPT-2's printable characters,
//      bytes_to_unicode); otherwise its characters, and a character without a token of its own
//      becomes its bytes' <0xAB> tokens (byte_fallback) or the unknown token (one for a run with
//      fuse_unk), as tokenizers' BPE::merge_word. A pre-token the pre-tokenizer leaves whole (no
//      pre-tokenizer, as in Llama 2, or Metaspace without split) is cut before each "▁" that no merge
//      can join to the character before it, so that its pieces go through the cache (bpe_model.h).
// Ids are computed on bytes throughout: the vocabulary's strings are mapped back to bytes once, when
// loading, and the merges become a table (left id, right id) -> (rank, merged id).
//
// Invalid UTF-8 (which the Python library cannot be given: it takes str): the regexes are compiled
// with PCRE2_MATCH_INVALID_UTF, under which no pattern item matches a byte of an invalid sequence,
// so such bytes fall in the gaps between matches and become pre-tokens of their own (with Split's
// Isolated behaviour), encoded by their byte tokens. decode(encode(x)) == x holds for any bytes when
// the vocabulary has all 256 byte tokens, as every byte-level BPE trained with ByteLevel's alphabet
// does. A byte whose token is missing is dropped, as `tokenizers` drops characters missing from a
// vocabulary without an unk_token. Normalizers leave invalid bytes as they are; a SentencePiece-style
// vocabulary takes each such byte for a character without a token (its <0xAB> token with byte
// fallback, so that it decodes to itself).
//
// End-of-text (eos_id()): the first of these that is an added token: <|endoftext|> (GPT-2, Qwen 2,
// SmolLM, OLMo), <|begin_of_text|> (Llama 3, which puts it before each document), <|end_of_text|>,
// <|im_end|>, </s>, <eos>, <s>; none otherwise.
//
// Documents (document_tokens): the special tokens of the post-processor's TemplateProcessing
// (Llama 2's <s> before), else the end-of-text token before. Decoding: bpe_decoder.h. Each token's span
// in the text (encode_with_spans, tokenizer.h): bpe_spans.cpp, beside the encoder, which it calls.
//
// Not supported, and refused when loading (a UsageError naming the key) rather than encoded
// differently: normalizers other than normalizer.h's, pre-tokenizers other than ByteLevel, Metaspace
// (alone), Split, Digits and Sequence, add_prefix_space on a step other than the first,
// byte_fallback with a byte-level vocabulary, dropout, word prefixes and suffixes, decoders other
// than ByteLevel (byte-level) or bpe_decoder.h's (otherwise), truncation and padding.
//
// Regexes: `tokenizers` runs them in Oniguruma, zerodp in PCRE2. Oniguruma's \s is Unicode's
// White_Space, PCRE2's also takes U+180E: patterns are compiled with \s, \S written as
// \p{White_Space}, \P{White_Space}. With that they agree on every pattern and text tests/tokenizer
// tries (Unicode spaces, long s and Kelvin sign under (?i), combining marks, other scripts' digits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace zerodp::data {

// Bounds on a tokenizer.json (docs/limits.md).
struct BpeLimits {
  static constexpr size_t kMaxFileBytes = size_t{64} << 20;   // the file (Llama 3's is 9 MB)
  static constexpr size_t kMaxVocab = size_t{1} << 22;        // ids, added tokens included (Llama 3: 128,256)
  static constexpr size_t kMaxMerges = size_t{1} << 22;       // merges (Llama 3: 280,147)
  static constexpr size_t kMaxTokenBytes = 1024;              // one vocabulary string or added token
  static constexpr size_t kMaxPatternBytes = 4096;            // one pre-tokenizer regex
  static constexpr size_t kMaxPreTokenizers = 16;             // steps of a Sequence
};

class BpeModel;  // data/bpe_model.h

// A piece of a text that encodes on its own: the ids of a text are the concatenation of the ids of
// its chunks, in order. Chunks let one document be encoded by several threads.
struct TextChunk {
  static constexpr uint32_t kText = 0xFFFFFFFFu;
  uint32_t added = kText;  // an added token's id, or kText for text encoded from [begin, end)
  size_t begin = 0, end = 0;           // the chunk's bytes in the text
  size_t seg_begin = 0, seg_end = 0;   // the piece between added tokens it belongs to (what the
                                       // pre-tokenizer's regexes see, lookaheads included)
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Parses and validates a tokenizer.json's text; `name` names it in messages ("tokenizer 'x.json'").
  static std::unique_ptr<BpeTokenizer> from_json(std::string_view json_text, const std::string& name);
  ~BpeTokenizer() override;

  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  void encode_with_spans(std::string_view text, std::vector<uint32_t>& ids,
                         std::vector<TokenSpan>& spans) const override;
  bool is_added_token(uint32_t id) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  int64_t vocab_size() const override;
  std::optional<uint32_t> eos_id() const override;
  std::string describe() const override;
  void document_tokens(std::vector<uint32_t>& before, std::vector<uint32_t>& after) const override;

  // Splits `text` into chunks of about `target_bytes` (added tokens first, then text pieces cut only
  // where the normalizer and the pre-tokenizer provably never join across the cut: after a '\n' and
  // before a letter, for the regexes of GPT-2, Llama 3 and Qwen 2 (before an ASCII letter with a
  // Unicode-form normalizer); SentencePiece-style, before a ' ' after an ASCII letter that no merge
  // joins to "▁"; others cut at added tokens only: bpe_model.h's CutRule).
  void chunk(std::string_view text, size_t target_bytes, std::vector<TextChunk>& chunks) const;
  // Appends the ids of one chunk of `text`.
  void encode_chunk(std::string_view text, const TextChunk& c, std::vector<uint32_t>& out) const;

 private:
  explicit BpeTokenizer(std::unique_ptr<BpeModel> m);
  size_t space_cut(std::string_view text, size_t from, size_t end) const;
  std::unique_ptr<BpeModel> m_;
};

// GPT-2's byte-to-character table (bytes_to_unicode): the code point that stands for byte b in a
// byte-level vocabulary. Printable Latin-1 bytes stand for themselves; the others for 256, 257, ...
uint32_t byte_level_char(uint8_t b);

}  // namespace zerodp::data
