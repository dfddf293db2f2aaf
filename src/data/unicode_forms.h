// Unicode normalization forms and lowercasing for the tokenizer's normalizers (normalizer.h), over
// utf8proc. Texts are UTF-8; bytes of invalid sequences are kept as they are.
#pragma once

#include <string>
#include <string_view>

namespace zerodp::data {

enum class UnicodeForm { kNfc, kNfkc, kNfd, kNfkd };

// `text` in the form: false when it already is (and `out` is untouched), else true with the result in
// `out`. Only the segments around characters that are not boundaries of the form go through utf8proc
// (normalizer.h).
bool to_unicode_form(UnicodeForm form, std::string_view text, std::string& out);

// Each character's full lowercase mapping, as Rust's char::to_lowercase (one to one except U+0130,
// which becomes "i̇"): false when nothing changes, else true with the result in `out`.
bool to_lowercase(std::string_view text, std::string& out);

}  // namespace zerodp::data
