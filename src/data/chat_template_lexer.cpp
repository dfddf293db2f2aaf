// The chat template's lexer: Jinja's, with the environment transformers makes (trim_blocks,
// lstrip_blocks, keep_trailing_newline off).
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "data/chat_template_ast.h"

namespace zerodp::data::chat {

void fail(std::string_view name, Pos pos, std::string_view what) {
  throw UsageError(fmt::format("{} line {}, column {}: {}", name, pos.line, pos.column, what));
}

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() (what `{%-` does to the text before it).
std::string_view rstrip_ws(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!py_isspace(utf8_next(s, i))) break;
    end = start;
  }
  return s.substr(0, end);
}

// Jinja reads a template with \r\n and \r turned into \n, and one final newline dropped
// (keep_trailing_newline is off).
std::string normalize_source(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view name) : src_(src), name_(name) {}

  std::vector<Token> run() {
    bool line_starting = true;
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t open = find_open(pos);
      std::string_view text = src_.substr(pos, (open == npos ? src_.size() : open) - pos);
      if (open == npos) {
        emit_data(text, pos);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: only whitespace between the line's start and a block or comment tag.
        const size_t l = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
        if (l > 0 || line_starting) {
          bool blank = l < text.size();
          for (size_t i = l; i < text.size() && blank; ++i) blank = ascii_space(text[i]);
          if (blank) text = text.substr(0, l);
        }
      }
      emit_data(text, pos);
      size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        pos = end_comment(p, open);
      } else if (kind == '%' && is_raw(p)) {
        pos = raw_block(open);
      } else {
        pos = tag(kind, open, p);
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back({Tok::kEnd, where(src_.size()), {}});
    return std::move(tokens_);
  }

 private:
  static constexpr size_t npos = std::string_view::npos;

  Pos where(size_t offset) {
    // Lines counted incrementally: offsets only grow.
    for (; counted_ < offset && counted_ < src_.size(); ++counted_) {
      if (src_[counted_] == '\n') {
        ++line_;
        line_start_ = counted_ + 1;
      }
    }
    return {line_, static_cast<int>(offset - line_start_) + 1};
  }

  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return npos;
  }

  void emit_data(std::string_view text, size_t offset) {
    if (!text.empty()) tokens_.push_back({Tok::kData, where(offset), std::string(text)});
  }

  // After `{#`: past `#}` (`-#}` strips all whitespace after it; `#}` one newline).
  size_t end_comment(size_t p, size_t open) {
    for (size_t i = p; i + 1 < src_.size(); ++i) {
      if ((src_[i] == '-' || src_[i] == '+') && src_.compare(i + 1, 2, "#}") == 0) return after_end(i + 3, src_[i], true);
      if (src_.compare(i, 2, "#}") == 0) return after_end(i + 2, '\0', true);
    }
    fail(name_, where(open), "a comment '{#' is not closed by '#}'");
  }

  size_t after_end(size_t p, char sign, bool trim_newline) {
    if (sign == '-') {
      while (p < src_.size()) {
        size_t i = p;
        if (!py_isspace(utf8_next(src_, i))) break;
        p = i;
      }
    } else if (sign != '+' && trim_newline && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  bool is_raw(size_t p) const {
    while (p < src_.size() && ascii_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && ascii_space(src_[p])) ++p;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  // `{% raw %}...{% endraw %}`: the text between as data, whitespace markers honoured.
  size_t raw_block(size_t open) {
    size_t p = src_.find("%}", open) + 2;
    const char open_end_sign = src_[p - 3];
    if (open_end_sign == '-') p = after_end(p, '-', false);
    else if (open_end_sign != '+' && p < src_.size() && src_[p] == '\n') ++p;
    for (size_t i = src_.find("{%", p); i != npos; i = src_.find("{%", i + 2)) {
      size_t q = i + 2;
      const char sign = q < src_.size() ? src_[q] : '\0';
      if (sign == '-' || sign == '+') ++q;
      while (q < src_.size() && ascii_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && ascii_space(src_[q])) ++q;
      char end_sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string_view text = src_.substr(p, i - p);
      if (sign == '-') text = rstrip_ws(text);
      emit_data(text, p);
      return after_end(q + 2, end_sign, true);
    }
    fail(name_, where(open), "a '{% raw %}' block has no '{% endraw %}'");
  }

  // The tokens of a `{{ }}` or `{% %}` tag from p; returns the offset after its end.
  size_t tag(char kind, size_t open, size_t p) {
    const bool block = kind == '%';
    tokens_.push_back({block ? Tok::kBlockBegin : Tok::kVarBegin, where(open), {}});
    const char close = block ? '%' : '}';
    int depth = 0;
    while (true) {
      while (p < src_.size() && ascii_space(src_[p])) ++p;
      if (p >= src_.size()) fail(name_, where(open), block ? "a tag '{%' is not closed by '%}'" : "'{{' is not closed by '}}'");
      if (depth == 0) {
        char sign = '\0';
        size_t q = p;
        if ((src_[q] == '-' || src_[q] == '+') && q + 2 < src_.size() + 0 && src_[q + 1] == close && src_[q + 2] == '}') sign = src_[q++];
        if (src_[q] == close && q + 1 < src_.size() && src_[q + 1] == '}') {
          tokens_.push_back({block ? Tok::kBlockEnd : Tok::kVarEnd, where(p), {}});
          return after_end(q + 2, sign, block);
        }
      }
      p = token(p, depth);
    }
  }

  size_t token(size_t p, int& depth) {
    const Pos at = where(p);
    const char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      tokens_.push_back({Tok::kName, at, std::string(src_.substr(p, e - p))});
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(p, at);
    if (c == '\'' || c == '"') return string(p, at);
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]",
                                       "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOps) {
      const size_t n = std::strlen(op);
      if (src_.compare(p, n, op) == 0) {
        if (n == 1 && (c == '(' || c == '[' || c == '{')) ++depth;
        if (n == 1 && (c == ')' || c == ']' || c == '}')) {
          if (depth == 0) fail(name_, at, fmt::format("unexpected '{}'", c));
          --depth;
        }
        tokens_.push_back({Tok::kOp, at, op});
        return p + n;
      }
    }
    fail(name_, at, fmt::format("unexpected character '{}'", c));
  }

  size_t number(size_t p, Pos at) {
    size_t e = p;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        e = q;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    tokens_.push_back({is_float ? Tok::kFloat : Tok::kInt, at, std::move(text)});
    return e;
  }

  // A quoted string with Python's escapes (\n, \t, \\, \', \", \xhh, \uhhhh, \Uhhhhhhhh, ...);
  // an unknown escape stays as written, as Python's unicode-escape leaves it.
  size_t string(size_t p, Pos at) {
    const char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    while (true) {
      if (i >= src_.size()) fail(name_, at, "a string is not closed");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) fail(name_, at, "a string is not closed");
      const char e = src_[i + 1];
      i += 2;
      // Python's one-character escapes: the letter after the backslash and what it stands for.
      static constexpr CharEscape kEscapes[] = {{'n', "\n"}, {'t', "\t"}, {'r', "\r"}, {'\\', "\\"},
                                                {'\'', "'"},  {'"', "\""},  {'a', "\a"}, {'b', "\b"},
                                                {'f', "\f"},  {'v', "\v"},  {'0', std::string_view("\0", 1)},
                                                {'\n', ""}};
      if (const CharEscape* one = find_escape(kEscapes, e)) {
        value += one->text;
        continue;
      }
      switch (e) {
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = i + k < src_.size() ? src_[i + k] : '\0';
            if (!std::isxdigit(static_cast<unsigned char>(h))) fail(name_, at, fmt::format("a bad '\\{}' escape in a string", e));
            cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) fail(name_, at, "a string escape names no Unicode character");
          append_utf8(value, cp);
          i += n;
          break;
        }
        default: value += '\\'; value += e; break;
      }
    }
    tokens_.push_back({Tok::kString, at, std::move(value)});
    return i + 1;
  }

  std::string_view src_;
  std::string_view name_;
  std::vector<Token> tokens_;
  size_t counted_ = 0, line_start_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<Token> lex(std::string_view source, std::string_view name, const ChatLimits& limits) {
  if (source.size() > limits.max_source_bytes)
    fail(name, {1, 1}, fmt::format("the template has {} bytes, more than the {} allowed", source.size(), limits.max_source_bytes));
  const std::string text = normalize_source(source);
  return Lexer(text, name).run();
}

}  // namespace zerodp::data::chat
