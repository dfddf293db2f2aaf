// The chat template's values as Python sees them: str(), json.dumps, ==, ordering, truthiness, and
// the UTF-8 string helpers (code points, whitespace, strip, split).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "data/chat_template_ast.h"

namespace zerodp::data::chat {
namespace {

constexpr int kMaxJsonDepth = 512;

// Python's repr(float): the shortest digits that round-trip, fixed notation for exponents in
// [-4, 16), else d.ddde+XX; always a '.0' on integral values.
std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
  std::string out;
  if (s.front() == '-') {
    out += '-';
    s.remove_prefix(1);
  }
  const size_t e = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e))
    if (c != '.') digits += c;
  const int exp10 = std::atoi(std::string(s.substr(e + 1)).c_str());
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out;
}

std::string py_number(const Json& j) {
  if (j.is_number_float()) return py_float(j.get<double>());
  if (j.is_number_unsigned()) return std::to_string(j.get<uint64_t>());
  return std::to_string(j.get<int64_t>());
}

// Python's repr(str): single quotes unless the text has ' and no ".
void py_repr_string(const std::string& s, std::string& out) {
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  out += q;
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
}

void py_repr(const Json& j, std::string& out, int depth) {
  if (depth > kMaxJsonDepth) throw std::domain_error("nested deeper than 512 levels");
  switch (j.type()) {
    case Json::value_t::null: out += "None"; break;
    case Json::value_t::boolean: out += j.get<bool>() ? "True" : "False"; break;
    case Json::value_t::string: py_repr_string(j.get_ref<const std::string&>(), out); break;
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const Json& x : j) {
        if (!first) out += ", ";
        first = false;
        py_repr(x, out, depth + 1);
      }
      out += ']';
      break;
    }
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!first) out += ", ";
        first = false;
        py_repr_string(k, out);
        out += ": ";
        py_repr(v, out, depth + 1);
      }
      out += '}';
      break;
    }
    default: out += py_number(j); break;
  }
}

void json_string(const std::string& s, std::string& out) {
  static constexpr CharEscape kJson[] = {{'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\r', "\\r"},
                                         {'\t', "\\t"},  {'\b', "\\b"},   {'\f', "\\f"}};
  out += '"';
  append_escaped(s, kJson, true, out);
  out += '"';
}

struct JsonWriter {
  int indent;
  std::string_view item_sep, key_sep;
  bool sort_keys;
  size_t max_bytes;
  std::string out;

  void newline(int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  }
  void check() const {
    if (out.size() > max_bytes) throw std::length_error("over the output limit");
  }
  void write(const Json& j, int level) {
    if (level > kMaxJsonDepth) throw std::domain_error("nested deeper than 512 levels");
    check();
    switch (j.type()) {
      case Json::value_t::null: out += "null"; break;
      case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; break;
      case Json::value_t::string: json_string(j.get_ref<const std::string&>(), out); break;
      case Json::value_t::number_float: {
        const double d = j.get<double>();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : py_float(d);
        break;
      }
      case Json::value_t::array: {
        if (j.empty()) {
          out += "[]";
          break;
        }
        out += '[';
        bool first = true;
        for (const Json& x : j) {
          if (!first) out += item_sep;
          first = false;
          newline(level + 1);
          write(x, level + 1);
        }
        newline(level);
        out += ']';
        break;
      }
      case Json::value_t::object: {
        if (j.empty()) {
          out += "{}";
          break;
        }
        std::vector<std::pair<const std::string*, const Json*>> entries;
        for (const auto& [k, v] : j.items()) entries.emplace_back(&k, &v);
        if (sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return *a.first < *b.first; });
        out += '{';
        bool first = true;
        for (const auto& [k, v] : entries) {
          if (!first) out += item_sep;
          first = false;
          newline(level + 1);
          json_string(*k, out);
          out += key_sep;
          write(*v, level + 1);
        }
        newline(level);
        out += '}';
        break;
      }
      default: out += py_number(j); break;
    }
  }
};

double as_double(const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); }
bool is_num(const Json& j) { return j.is_number() || j.is_boolean(); }

bool json_equal(const Json& a, const Json& b, int depth) {
  if (depth > kMaxJsonDepth) throw std::domain_error("nested deeper than 512 levels");
  if (is_num(a) && is_num(b)) {
    if (a.is_number_float() || b.is_number_float()) return as_double(a) == as_double(b);
    const auto ia = a.is_boolean() ? int64_t{a.get<bool>()} : a.get<int64_t>();
    const auto ib = b.is_boolean() ? int64_t{b.get<bool>()} : b.get<int64_t>();
    return ia == ib;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i], depth + 1)) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      const auto it = b.find(k);
      if (it == b.end() || !json_equal(v, *it, depth + 1)) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNamespace: return "namespace";
    case Value::Kind::kMacro: return "macro";
    case Value::Kind::kLoop: return "loop";
    case Value::Kind::kBuiltin: return "function";
    case Value::Kind::kJson: break;
  }
  switch (v.json->type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    case Json::value_t::number_float: return "float";
    default: return "int";
  }
}

bool truthy(const Value& v) {
  if (v.kind == Value::Kind::kUndefined) return false;
  if (!v.is_json()) return true;
  const Json& j = *v.json;
  switch (j.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j.get<bool>();
    case Json::value_t::string: return !j.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !j.empty();
    case Json::value_t::number_float: return j.get<double>() != 0.0;
    default: return j.get<int64_t>() != 0;
  }
}

std::string py_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNamespace: return "<Namespace>";
    case Value::Kind::kMacro: return "<Macro>";
    case Value::Kind::kLoop: return "<LoopContext>";
    case Value::Kind::kBuiltin: return "<function>";
    case Value::Kind::kJson: break;
  }
  if (v.json->is_string()) return v.json->get<std::string>();
  std::string out;
  py_repr(*v.json, out, 0);
  return out;
}

std::string py_json(const Json& v, int indent, std::string_view item_sep, std::string_view key_sep, bool sort_keys,
                    size_t max_bytes) {
  JsonWriter w{indent, item_sep, key_sep, sort_keys, max_bytes, {}};
  w.write(v, 0);
  w.check();
  return std::move(w.out);
}

bool py_equal(const Value& a, const Value& b) {
  if (a.is_json() && b.is_json()) return json_equal(*a.json, *b.json, 0);
  if (a.kind != b.kind) return false;
  if (a.kind == Value::Kind::kUndefined) return true;
  if (a.kind == Value::Kind::kNamespace) return a.ns == b.ns;
  return a.macro == b.macro && a.loop == b.loop && a.name == b.name;
}

bool py_order(const Value& a, const Value& b, int& result) {
  if (!a.is_json() || !b.is_json()) return false;
  const Json& x = *a.json;
  const Json& y = *b.json;
  if (is_num(x) && is_num(y)) {
    if (x.is_number_float() || y.is_number_float()) {
      const double dx = as_double(x), dy = as_double(y);
      result = dx < dy ? -1 : dx > dy ? 1 : 0;
    } else {
      const auto ix = x.is_boolean() ? int64_t{x.get<bool>()} : x.get<int64_t>();
      const auto iy = y.is_boolean() ? int64_t{y.get<bool>()} : y.get<int64_t>();
      result = ix < iy ? -1 : ix > iy ? 1 : 0;
    }
    return true;
  }
  if (x.is_string() && y.is_string()) {
    // UTF-8 byte order is code point order.
    const int c = x.get_ref<const std::string&>().compare(y.get_ref<const std::string&>());
    result = c < 0 ? -1 : c > 0 ? 1 : 0;
    return true;
  }
  if (x.is_array() && y.is_array()) {
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      const Value xi = Value::part(a, x[i]), yi = Value::part(b, y[i]);
      if (py_equal(xi, yi)) continue;
      return py_order(xi, yi, result);
    }
    result = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    return true;
  }
  return false;
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (n == 1 || i + n > s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

size_t utf8_offset(std::string_view s, size_t index) {
  size_t i = 0;
  for (size_t k = 0; k < index && i < s.size(); ++k) utf8_next(s, i);
  return i;
}

bool py_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  // The code points of s, as [start, end) byte ranges.
  std::vector<std::pair<size_t, uint32_t>> cps;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    cps.emplace_back(at, utf8_next(s, i));
  }
  auto strip_it = [&](uint32_t cp) {
    if (!chars) return py_isspace(cp);
    for (size_t i = 0; i < chars->size();)
      if (utf8_next(*chars, i) == cp) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b].second)) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1].second)) --e;
  const size_t from = b < cps.size() ? cps[b].first : s.size();
  const size_t to = e < cps.size() ? cps[e].first : s.size();
  return std::string(s.substr(from, to - from));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size()) {
      size_t j = i;
      if (!py_isspace(utf8_next(s, j))) break;
      i = j;
    }
  };
  skip_space();
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      // The rest, trailing whitespace removed, as Python does.
      out.push_back(py_strip(s.substr(i), nullptr, false, true));
      break;
    }
    const size_t start = i;
    while (i < s.size()) {
      size_t j = i;
      if (py_isspace(utf8_next(s, j))) break;
      i = j;
    }
    out.emplace_back(s.substr(start, i - start));
    skip_space();
  }
  return out;
}

const CharEscape* find_escape(std::span<const CharEscape> table, char c) {
  for (const CharEscape& e : table)
    if (e.c == c) return &e;
  return nullptr;
}

void append_escaped(std::string_view s, std::span<const CharEscape> table, bool hex_controls, std::string& out) {
  for (const char c : s) {
    if (const CharEscape* e = find_escape(table, c)) {
      out += e->text;
    } else if (hex_controls && static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
}

}  // namespace zerodp::data::chat
