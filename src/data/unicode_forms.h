// Unicode normalization forms and lowercasing for the tokenizer's normalizers (normalizer.h), over
// utf8proc. Texts are UTF-8; bytes of invalid sequences are kept as they are.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace zerodp::data {

enum class UnicodeForm { kNfc, kNfkc, kNfd, kNfkd };

// A stretch of a text that a form changed: text[in_begin, in_end) became out[out_begin, out_end).
struct FormChange {
  size_t in_begin, in_end, out_begin, out_end;
};

// `text` in the form: false when it already is (and `out` is untouched), else true with the result in
// `out`. Only the segments around characters that are not boundaries of the form go through utf8proc
// (normalizer.h). With `changes`, the segments that changed are appended to it, in order.
bool to_unicode_form(UnicodeForm form, std::string_view text, std::string& out,
                     std::vector<FormChange>* changes = nullptr);

// Each character's full lowercase mapping, as Rust's char::to_lowercase (one to one except U+0130,
// which becomes "i̇"): false when nothing changes, else true with the result in `out`.
bool to_lowercase(std::string_view text, std::string& out);

}  // namespace zerodp::data
