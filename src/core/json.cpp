#include "core/json.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp {

using nlohmann::json;

namespace {

// nlohmann's DOM builder behind the limits' checks. (json::parse with a callback, which did the same,
// looks through the whole enclosing container each time an object ends: a tokenizer.json's 300,000
// added tokens took a minute to parse. The builder without a callback appends in constant time.)
template <class J>
class BoundedSax {
 public:
  BoundedSax(J& root, std::string_view source, const JsonLimits& limits)
      : dom_(root, /*allow_exceptions=*/true), source_(source), limits_(limits) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(typename J::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(typename J::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(typename J::number_float_t v, const std::string& s) { return dom_.number_float(v, s); }
  bool string(std::string& v) { return dom_.string(v); }
  bool binary(typename J::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    open();
    if (limits_.refuse_duplicate_keys) keys_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(std::string& k) {
    if (limits_.refuse_duplicate_keys && !keys_.back().insert(k).second)
      throw UsageError(fmt::format("{}: key {} appears twice in one object", source_, describe_text(k)));
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    if (limits_.refuse_duplicate_keys) keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    open();
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  // (the builder would rethrow `e` as its base class, not as the json::parse_error it is)
  [[noreturn]] bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    // nlohmann's message quotes the last token read, which may be long: keep the position only.
    throw UsageError(fmt::format("{}: not valid JSON (syntax error at byte {})", source_, position));
  }

 private:
  void open() {
    if (depth_ + 1 > limits_.max_depth)
      throw UsageError(fmt::format("{}: JSON nested deeper than {} levels", source_, limits_.max_depth));
    ++depth_;
  }
  nlohmann::detail::json_sax_dom_parser<J> dom_;
  std::string_view source_;
  const JsonLimits& limits_;
  size_t depth_ = 0;                         // containers open
  std::vector<std::set<std::string>> keys_;  // keys seen in each open object (duplicates refused)
};

// Parses `text` into a J (json, or ordered_json that keeps the keys' order) within the limits.
template <class J>
J parse_bounded(std::string_view text, std::string_view source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    throw UsageError(fmt::format("{}: {} bytes of JSON, over the {} allowed", source, text.size(), limits.max_bytes));
  try {
    J root;
    BoundedSax<J> sax(root, source, limits);
    J::sax_parse(text.begin(), text.end(), &sax, J::input_format_t::json, /*strict=*/true,
                 /*ignore_comments=*/false);
    return root;
  } catch (const typename J::parse_error& e) {
    // nlohmann's message quotes the last token read, which may be long: keep the position only.
    throw UsageError(fmt::format("{}: not valid JSON (syntax error at byte {})", source, e.byte));
  } catch (const typename J::exception& e) {
    throw UsageError(fmt::format("{}: not valid JSON ({})", source, describe_text(e.what(), 120)));
  }
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view source, const JsonLimits& limits) {
  return parse_bounded<json>(text, source, limits);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, std::string_view source, const JsonLimits& limits) {
  return parse_bounded<nlohmann::ordered_json>(text, source, limits);
}

std::string describe_text(std::string_view s, size_t max_chars) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max_chars; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i == s.size()) return out;
  // Do not end inside a UTF-8 sequence: drop continuation bytes and their lead byte.
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
  if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();
  return fmt::format("{}... ({} bytes)", out, s.size());
}

namespace {

// A container whose elements are all scalars (so printing it cannot recurse), printed when short.
template <class J>
std::string flat_and_short(const J& v, size_t max_chars) {
  std::string out = v.is_array() ? "[" : "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->is_structured() || it->is_binary() || out.size() > max_chars) return "";
    if (!first) out += ", ";
    first = false;
    if (v.is_object()) out += J(it.key()).dump(-1, ' ', true, J::error_handler_t::replace) + ": ";
    out += it->dump(-1, ' ', true, J::error_handler_t::replace);
  }
  out += v.is_array() ? "]" : "}";
  return out.size() <= max_chars ? out : "";
}

template <class J>
std::string describe(const J& v) {
  if (v.is_structured() && !v.empty() && v.size() <= 8) {
    if (std::string flat = flat_and_short(v, 60); !flat.empty()) return flat;
  }
  switch (v.type()) {
    case J::value_t::object:
      return v.empty() ? "an empty object" : fmt::format("an object with {} key{}", v.size(), v.size() == 1 ? "" : "s");
    case J::value_t::array:
      return v.empty() ? "an empty array"
                       : fmt::format("an array of {} element{}", v.size(), v.size() == 1 ? "" : "s");
    case J::value_t::string: return fmt::format("\"{}\"", describe_text(v.template get_ref<const std::string&>()));
    case J::value_t::binary: return "binary data";
    case J::value_t::discarded: return "a discarded value";
    default: return v.dump();  // null, booleans and numbers: short, no nesting
  }
}

}  // namespace

std::string describe_json(const json& v) { return describe(v); }
std::string describe_json(const nlohmann::ordered_json& v) { return describe(v); }

}  // namespace zerodp
