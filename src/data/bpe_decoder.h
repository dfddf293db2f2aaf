// The decoder and the post-processor of a tokenizer.json, for a BPE tokenizer (bpe.h).
//
// Decoder: ByteLevel (byte-level vocabularies: each token's characters stand for bytes), or, for the
// vocabularies of SentencePiece-style files (Llama 2, Mistral), Metaspace or a Sequence of Replace
// (String pattern), ByteFallback, Fuse, Strip and Metaspace, applied to the tokens' strings as
// `tokenizers` applies them (Strip and Metaspace act on each string as it then is: after Fuse, the
// whole text). One difference: ByteFallback turns a run of <0xAB> tokens into its bytes even when
// they are not valid UTF-8 (where `tokenizers` writes U+FFFD for each), so that decoding one token at
// a time gives the bytes of a character split over several tokens.
//
// Post-processor: only the special tokens of a TemplateProcessing's `single` template (alone or in a
// Sequence) are read: those before $A and those after it are what `zerodp tokenize` puts around each
// document (Llama 2's "<s> $A": <s> before). Other post-processors change no ids of a single text
// encoded without special tokens and are ignored, except a ByteLevel step's `trim_offsets` (with its
// `add_prefix_space`), which trims the spaces off the tokens' spans (Tokenizer::encode_with_spans).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zerodp::data {

class Reader;  // data/tokenizer_json.h

// The Metaspace pre-tokenizer: ' ' becomes `replacement`, which is put before a piece that does
// not start with it (always; first: only at the start of the text; never), and the piece is split
// before each `replacement` (MergedWithNext) when `split`.
struct Metaspace {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement;
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

// Metaspace's keys at `key` (the pre-tokenizer's or the decoder's), with the older add_prefix_space.
Metaspace read_metaspace(const Reader& r, const nlohmann::json& v, const std::string& key);

class DecoderChain {
 public:
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind = Kind::kFuse;
    std::string pattern, content;  // Replace; Strip's and Metaspace's character in `content`
    size_t start = 0, stop = 0;    // Strip: characters removed at most at each end
    bool prepends = true;          // Metaspace: prepend_scheme is not "never"
  };

  // The decoder `v` (the file's `decoder`) for a vocabulary that is not byte-level; refusals name `key`.
  static std::unique_ptr<DecoderChain> from_json(const Reader& r, const nlohmann::json& v, const std::string& key);

  // The text of `tokens` (each token's string), as `tokenizers`' decode.
  std::string decode(std::vector<std::string>& tokens) const;

 private:
  std::vector<Step> steps_;
};

// The byte a byte-fallback token "<0xAB>" stands for (hex digits of either case, as the library's
// decoder reads them), or -1.
int fallback_byte(std::string_view token);

// The ids a TemplateProcessing puts before and after a single text, and whether a ByteLevel step
// trims the spaces at the ends of the tokens' offsets (the library's default when the key is absent).
struct DocumentTokens {
  std::vector<uint32_t> before, after;
  bool trim_offsets = false;
  bool trim_keeps_prefix_space = false;  // the step's add_prefix_space: the first token keeps one space
};

// The file's `post_processor` (may be null): the template's special tokens, or none.
DocumentTokens read_post_processor(const Reader& r, const nlohmann::json* v);

}  // namespace zerodp::data
