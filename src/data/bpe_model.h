// What a BPE tokenizer (bpe.h) is made of once loaded: the vocabulary as bytes, the merge table, the
// added tokens indexed for matching, the normalizer, and the pre-tokenizer's steps. bpe_json.cpp
// builds it from a tokenizer.json; bpe_encode.cpp and bpe_text.cpp encode with it. Read-only after
// loading, so one model is shared by every encoding thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "data/added_trie.h"
#include "data/bpe_decoder.h"
#include "data/bpe_regex.h"
#include "data/bpe_tables.h"
#include "data/normalizer.h"

namespace zerodp::data {

// How a Split step joins its matches to the text around them (tokenizers' SplitDelimiterBehavior).
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One pre-tokenizer step: a regex (Split with a Regex pattern, Digits, ByteLevel with use_regex) or
// a literal string (Split with a String pattern).
struct PreStep {
  std::unique_ptr<Regex> regex;
  std::string literal;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
};

// An entry of tokenizer.json's `added_tokens`, with its flags.
struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

// A range [b, e) of a text; `match`: a regex match (or an added token) rather than a gap.
struct Piece {
  size_t b, e;
  bool match;
};

// Where a long text may be cut into chunks that encode alone to the same ids (bpe.h: chunk).
enum class CutRule {
  kNone,
  kNewlineLetter,       // after '\n', before a letter (the regexes of GPT-2, Llama 3, Qwen 2)
  kNewlineAsciiLetter,  // the same with a Unicode-form normalizer, before an ASCII letter only
  kSpaceAfterLetter,    // SentencePiece-style: before ' ' after an ASCII letter the cut is allowed after
};

// A number distinct for every model made in this process (the per-thread cache's owner tag).
uint64_t next_bpe_model_serial();

class BpeModel {
 public:
  std::string name;                      // "tokenizer 'path'", for messages
  std::vector<std::string> token_bytes;  // id -> bytes (decode)
  std::vector<uint8_t> has_token;        // id -> 1 when some token has this id
  std::vector<uint8_t> is_added;         // id -> 1 for an added token
  int32_t byte_id[256];                  // byte -> its single-byte token, or -1 (byte-level)
  std::unordered_map<uint32_t, uint32_t> char_id;  // code point -> its one-character token (otherwise)
  int32_t fallback_id[256];              // byte -> its <0xAB> token, or -1 (byte_fallback)
  bool byte_fallback = false;
  PairTable pairs;
  std::unordered_map<std::string, uint32_t> whole;  // BPE vocabulary bytes -> id (ignore_merges)
  bool ignore_merges = false;
  std::optional<uint32_t> unk_id;
  bool fuse_unk = false;
  std::vector<AddedToken> added;
  // The added tokens of each pass (indices in `added`). With two passes, pass 0 matches the tokens
  // that are not normalized and pass 1 the others; with one pass, pass 0 matches all.
  AddedTrie added_tries[2];
  int single_first[2] = {-1, -1};  // the only first byte of a pass's added tokens, if only one
  bool two_passes = false;
  std::unique_ptr<Normalizer> normalizer;  // null: none
  std::optional<Metaspace> metaspace;
  std::vector<PreStep> steps;
  size_t regex_steps = 0;  // steps with a regex (the budget of a text's regex work is per step)
  bool prefix_space = false;
  bool byte_level = false;  // a ByteLevel pre-tokenizer step was given
  CutRule cut = CutRule::kNone;
  // A word the pre-tokenizer leaves whole (SentencePiece-style) is cut before each `word_cut` (its
  // "▁") that follows a character not in `joins_word_cut`: no token holds that character followed
  // by "▁", so no merge crosses the cut, and the pieces go through the cache.
  std::string word_cut;
  std::unordered_set<uint32_t> joins_word_cut;
  std::unique_ptr<DecoderChain> decoder;  // null: the tokens' bytes concatenated (ByteLevel)
  DocumentTokens document;                // the post-processor's template
  std::optional<uint32_t> eos;
  std::string pattern_label;  // which known regex the pre-tokenizer uses, for describe()
  size_t merges_count = 0;
  uint64_t serial = next_bpe_model_serial();
  std::unique_ptr<Regex> word_char;  // \w at a position (single_word)
  std::unique_ptr<Regex> letter;     // \p{L} at a position (cuts)

  // The pieces of `text` between and around added tokens: (index in `added`, range) for an added
  // token, (-1, range) for text. With a normalizer, only the tokens that are not normalized: the
  // others are found in each normalized piece (encode_text).
  void split_added(std::string_view text, std::vector<std::pair<int32_t, Piece>>& parts) const;
  // Appends the ids of text[from, to), a piece between added tokens [sb, se) or a chunk of one.
  void encode_text(std::string_view text, size_t sb, size_t se, size_t from, size_t to,
                   std::vector<uint32_t>& out) const;
  // encode() with each token's span (Tokenizer::encode_with_spans; bpe_spans.cpp).
  void encode_spans(std::string_view text, std::vector<uint32_t>& ids, std::vector<TokenSpan>& spans) const;
  // The bytes of ids[i] (a UsageError names an id not in the vocabulary and its position).
  const std::string& token(std::span<const uint32_t> ids, size_t i) const;
  // Appends the bytes of each token of `ids` to `tokens`.
  void token_strings(std::span<const uint32_t> ids, std::vector<std::string>& tokens) const;

 private:
  void find_added(std::string_view text, size_t b, size_t e, int pass,
                  std::vector<std::pair<int32_t, Piece>>& out) const;
  bool starts_with_word(std::string_view s, size_t at) const;
  bool ends_with_word(std::string_view s, size_t end) const;
  void piece_spans(std::string_view text, size_t b, size_t e, std::vector<uint32_t>& ids,
                   std::vector<TokenSpan>& spans) const;
  void pre_tokenized(std::string_view subject, const TokenSpan* align, bool at_start, bool at_text_start,
                     std::string& s, std::vector<TokenSpan>& s_align) const;
  size_t symbol_length(uint32_t id, std::string_view s, size_t at) const;
  bool has_own_token(std::string_view s, size_t at, size_t& len) const;
  void trim_spans(std::string_view text, std::span<const uint32_t> ids, std::span<TokenSpan> spans) const;
  void encode_normalized(std::string_view text, size_t sb, size_t se, size_t from, size_t to,
                         std::vector<uint32_t>& out) const;
  void encode_piece(std::string_view subject, size_t b, size_t e, bool at_start, bool at_text_start,
                    std::vector<uint32_t>& out) const;
  void encode_whole(std::string_view w, std::vector<uint32_t>& out) const;
  void initial_chars(std::string_view w, std::vector<uint32_t>& sym) const;
  void pretokenize(size_t k, std::string_view subject, size_t from, size_t to, RegexBudget& budget,
                   std::vector<uint32_t>& out) const;
  void encode_word(std::string_view w, std::vector<uint32_t>& out) const;
  void bpe(std::string_view w, std::vector<uint32_t>& out) const;
  void merge_small(std::vector<uint32_t>& sym) const;
  void merge_large(std::vector<uint32_t>& sym) const;
};

}  // namespace zerodp::data
