// The normalizer of a tokenizer.json (its `normalizer` key), as the `tokenizers` library applies it
// to each piece of a text between added tokens, before pre-tokenization:
//   NFC, NFKC, NFD, NFKD   Unicode normalization forms, through utf8proc (Debian's libutf8proc-dev);
//   Replace                every non-overlapping match of a String or a Regex pattern, left to right,
//                          becomes `content` (Llama 2: " " -> "▁");
//   Prepend                `prepend` before a piece that is not empty (Llama 2: "▁");
//   Lowercase              each character's full lowercase mapping (Rust's char::to_lowercase);
//   Strip                  White_Space removed at the left and/or right end of a piece;
//   Sequence               the above in order (no nesting).
// Anything else is refused when loading, naming the key.
//
// Unicode forms are computed per segment: a text is cut before each character that is a boundary of
// the form (combining class 0, unchanged by the form, never the second of a canonical composition),
// segments made of one such character are copied as they are, and only the others go through
// utf8proc. ASCII never does, so a text that needs no change costs a scan. Bytes that are not valid
// UTF-8 (which `tokenizers`, taking str, never sees) are left as they are and cut segments.
// utf8proc 2.8 implements Unicode 15; `tokenizers` (the unicode-normalization-alignments crate) an
// older version: characters assigned since may normalize differently (none in common text).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "data/tokenizer.h"

namespace zerodp::data {

class Reader;  // data/tokenizer_json.h
class Regex;   // data/bpe_regex.h

class Normalizer {
 public:
  enum class Kind { kNfc, kNfkc, kNfd, kNfkd, kReplace, kPrepend, kLowercase, kStrip };
  struct Step {
    Kind kind = Kind::kNfc;
    std::string pattern;           // Replace: a String pattern (empty with a Regex)
    std::unique_ptr<Regex> regex;  // Replace: a Regex pattern
    std::string content;           // Replace's content, Prepend's prepend
    bool left = false, right = false;  // Strip
  };

  // The normalizer of `v` (the file's `normalizer`, not null); nullptr when it does nothing (an empty
  // Sequence). Refusals name `key`.
  static std::unique_ptr<Normalizer> from_json(const Reader& r, const nlohmann::json& v, const std::string& key);
  ~Normalizer();

  // The normalized `piece`: a view of `piece` itself when nothing changes, else of `buf`. With
  // `at_start` false the piece is a later chunk of a longer one (bpe.h: TextChunk), and Prepend and
  // left Strip, which act at a piece's start only, do nothing.
  std::string_view apply(std::string_view piece, bool at_start, std::string& buf) const;
  // The same, with where each byte of the result comes from: `align` holds a span for each byte of
  // `piece` on entry (the original characters it stands for) and one for each byte of the result on
  // return. What a step writes stands for what it replaced: a stretch a Unicode form changed (as a
  // whole), a Replace match, a lowercased character; Prepend's text stands for the first character.
  // Slower than apply(): for Tokenizer::encode_with_spans.
  std::string_view apply_aligned(std::string_view piece, bool at_start, std::string& buf,
                                 std::vector<TokenSpan>& align) const;

  // Only Unicode forms: a text may be cut after '\n' before an ASCII letter, and the pieces
  // normalized apart, with the same result (both are boundaries of every form).
  bool unicode_only() const;
  // Only Unicode forms, Prepend, and Replace of " ": cutting before an ASCII space that follows an
  // ASCII letter changes nothing but where Prepend applies.
  bool space_local() const;
  // The content Replace gives " " (Llama 2's "▁"), or empty.
  std::string space_replacement() const;
  const std::vector<Step>& steps() const { return steps_; }

 private:
  std::vector<Step> steps_;
};

}  // namespace zerodp::data
