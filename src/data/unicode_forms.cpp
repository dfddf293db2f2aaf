#include "data/unicode_forms.h"

#include <utf8proc.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "data/byte_level.h"

namespace zerodp::data {

namespace {

// Code points below this have their boundary flags in a table; the few above are computed on use.
// Every canonical composition has both parts below it.
constexpr int32_t kTableEnd = 0x30000;

int form_index(UnicodeForm f) { return static_cast<int>(f); }
bool composes(UnicodeForm f) { return f == UnicodeForm::kNfc || f == UnicodeForm::kNfkc; }
utf8proc_option_t decompose_options(UnicodeForm f) {
  const int compat = f == UnicodeForm::kNfkc || f == UnicodeForm::kNfkd ? UTF8PROC_COMPAT : 0;
  return static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | compat);
}
utf8proc_option_t form_options(UnicodeForm f) {
  const int compat = f == UnicodeForm::kNfkc || f == UnicodeForm::kNfkd ? UTF8PROC_COMPAT : 0;
  const int step = composes(f) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
  return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | step | compat);
}

// Characters of combining class 0 that are the second part of a canonical composition (Hangul
// vowels and trailing consonants, some Indic vowel signs): a character before them may absorb them,
// so no segment may start at one. Found from the compositions themselves: the last character of the
// canonical decomposition of every character that NFC leaves as it is.
const std::vector<uint8_t>& composing_seconds() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(kTableEnd, 0);
    utf8proc_int32_t buf[8];
    int boundclass = 0;
    for (int32_t p = 0x80; p < kTableEnd; ++p) {
      const utf8proc_ssize_t n = utf8proc_decompose_char(p, buf, 8, UTF8PROC_DECOMPOSE, &boundclass);
      if (n < 2 || n > 8) continue;
      const int32_t last = buf[n - 1];
      if (utf8proc_get_property(last)->combining_class != 0) continue;
      const utf8proc_ssize_t m = utf8proc_normalize_utf32(buf, n, UTF8PROC_COMPOSE);
      if (m == 1 && buf[0] == p && last < kTableEnd) t[static_cast<size_t>(last)] = 1;
    }
    return t;
  }();
  return table;
}

// Whether a text may be cut before `c` for the form: combining class 0, the form leaves it as it is,
// and it never composes with a character before it.
bool is_boundary(UnicodeForm f, int32_t c) {
  if (utf8proc_get_property(c)->combining_class != 0) return false;
  if (c < kTableEnd && composing_seconds()[static_cast<size_t>(c)]) return false;
  utf8proc_int32_t buf[32];
  int boundclass = 0;
  const utf8proc_ssize_t n = utf8proc_decompose_char(c, buf, 32, decompose_options(f), &boundclass);
  if (n == 1 && buf[0] == c) return true;
  if (!composes(f) || n < 1 || n > 32) return false;
  return utf8proc_normalize_utf32(buf, n, UTF8PROC_COMPOSE) == 1 && buf[0] == c;
}

// One bit per form and code point: a boundary. A form's bits are built on its first use.
class BoundaryTable {
 public:
  explicit BoundaryTable(UnicodeForm f) : form_(f), bit_(static_cast<uint8_t>(1u << form_index(f))) {
    std::call_once(built_[form_index(f)], [&] {
      for (int32_t cp = 0; cp < kTableEnd; ++cp)
        if (is_boundary(f, cp)) bits_[static_cast<size_t>(cp)] |= bit_;
    });
  }
  bool boundary(int32_t c) const {
    return c < kTableEnd ? (bits_[static_cast<size_t>(c)] & bit_) != 0 : is_boundary(form_, c);
  }

 private:
  static inline std::vector<uint8_t> bits_ = std::vector<uint8_t>(kTableEnd, 0);
  static inline std::once_flag built_[4];
  UnicodeForm form_;
  uint8_t bit_;
};

// The code point at s[i] if it starts a valid UTF-8 sequence (its length in `len`), else -1.
int32_t valid_code_point(std::string_view s, size_t i, size_t& len) {
  uint32_t cp = 0;
  len = valid_utf8_at(s, i, cp);
  return len == 0 ? -1 : static_cast<int32_t>(cp);
}

// Appends form(segment) (valid UTF-8) to out.
void normalize_segment(UnicodeForm f, std::string_view seg, std::string& out) {
  thread_local std::vector<utf8proc_int32_t> cps;
  if (cps.size() < seg.size() + 16) cps.resize(seg.size() + 16);
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(seg.data());
  const auto len = static_cast<utf8proc_ssize_t>(seg.size());
  utf8proc_ssize_t n = utf8proc_decompose(p, len, cps.data(), static_cast<utf8proc_ssize_t>(cps.size()), form_options(f));
  if (n > static_cast<utf8proc_ssize_t>(cps.size())) {
    cps.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(p, len, cps.data(), n, form_options(f));
  }
  if (n < 0) throw RuntimeFailure(std::string("utf8proc could not normalize a segment: ") + utf8proc_errmsg(n));
  const utf8proc_ssize_t bytes = utf8proc_reencode(cps.data(), n, form_options(f));
  if (bytes < 0) throw RuntimeFailure(std::string("utf8proc could not encode a segment: ") + utf8proc_errmsg(bytes));
  out.append(reinterpret_cast<const char*>(cps.data()), static_cast<size_t>(bytes));
}

}  // namespace

bool to_unicode_form(UnicodeForm form, std::string_view text, std::string& out, std::vector<FormChange>* changes) {
  const BoundaryTable table(form);
  size_t copied = 0;        // text[0, copied) is in `out` (once something changed)
  size_t last_start = 0;    // where the last boundary character starts (a segment may start there)
  bool changed = false;
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      last_start = i++;
      continue;
    }
    size_t len = 1;
    const int32_t c = valid_code_point(text, i, len);
    if (c < 0 || table.boundary(c)) {  // invalid bytes pass through as boundaries
      last_start = i;
      i += c < 0 ? 1 : len;
      continue;
    }
    // A character the form may change or join to the one before: the segment from the last
    // boundary character to the next one goes through utf8proc.
    size_t end = i + len;
    while (end < text.size()) {
      if (static_cast<uint8_t>(text[end]) < 0x80) break;
      size_t l = 1;
      const int32_t d = valid_code_point(text, end, l);
      if (d < 0 || table.boundary(d)) break;
      end += l;
    }
    const size_t seg = std::max(last_start, copied);
    std::string_view segment = text.substr(seg, end - seg);
    thread_local std::string normalized;
    normalized.clear();
    normalize_segment(form, segment, normalized);
    if (!changed && normalized == segment) {
      i = end;
      continue;
    }
    if (!changed) {
      out.clear();
      changed = true;
    }
    out.append(text.substr(copied, seg - copied));
    if (changes && normalized != segment) changes->push_back({seg, end, out.size(), out.size() + normalized.size()});
    out += normalized;
    copied = end;
    i = end;
  }
  if (changed) out.append(text.substr(copied));
  return changed;
}

bool to_lowercase(std::string_view text, std::string& out) {
  size_t i = 0;
  while (i < text.size() && static_cast<uint8_t>(text[i]) < 0x80 && !(text[i] >= 'A' && text[i] <= 'Z')) ++i;
  if (i == text.size()) return false;
  out.assign(text.substr(0, i));
  while (i < text.size()) {
    const char ch = text[i];
    if (static_cast<uint8_t>(ch) < 0x80) {
      out += ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
      ++i;
      continue;
    }
    size_t len = 1;
    const int32_t c = valid_code_point(text, i, len);
    if (c < 0) {
      out += ch;
      ++i;
      continue;
    }
    if (c == 0x130) {  // the one character whose full lowercase mapping is two: "i" and U+0307
      out += "i\xCC\x87";
    } else {
      utf8proc_uint8_t enc[4];
      const utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_tolower(c), enc);
      out.append(reinterpret_cast<const char*>(enc), static_cast<size_t>(n));
    }
    i += len;
  }
  return true;
}

}  // namespace zerodp::data
