// UTF-8 and GPT-2's byte <-> character table, for the byte-level BPE tokenizer (bpe.h): a
// byte-level vocabulary writes each byte as one printable character, and the tokenizer works on the
// bytes those characters stand for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace zerodp::data {


// Bytes that stand for themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'.
inline bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

struct ByteTable {
  uint32_t to_char[256];
  int16_t from_char[512];  // code point (< 512) -> byte, or -1
  ByteTable() {
    std::fill(std::begin(from_char), std::end(from_char), int16_t{-1});
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = byte_is_printable(b) ? static_cast<uint32_t>(b) : next++;
      from_char[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};
inline const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

// Decodes the UTF-8 code point at s[i] (valid UTF-8: JSON strings are). Advances i.
inline uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto c = static_cast<uint8_t>(s[i]);
  int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// Byte-length of the UTF-8 sequence starting with lead byte c (1 for a stray byte).
inline size_t utf8_len(uint8_t c) { return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1; }

// The length of the well-formed UTF-8 sequence at s[i] (Unicode's table 3-7: no overlong forms, no
// surrogates, nothing above U+10FFFF) and its code point in `cp`; 0 when s[i] starts none.
inline size_t valid_utf8_at(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  return n;
}

// Unicode White_Space (Rust's char::is_whitespace, the regex crate's \s).
inline bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point that ends at s[end) (for a valid sequence; a stray byte otherwise), and its start.
inline uint32_t prev_code_point(std::string_view s, size_t end, size_t& start) {
  size_t b = end - 1;
  int back = 0;
  while (b > 0 && back < 3 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b, ++back;
  size_t i = b;
  const uint32_t cp = next_code_point(s, i);
  if (i != end) {  // not a well-formed sequence ending at `end`
    start = end - 1;
    return static_cast<uint8_t>(s[end - 1]);
  }
  start = b;
  return cp;
}

}  // namespace zerodp::data
