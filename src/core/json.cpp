#include "core/json.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp {

using nlohmann::json;

nlohmann::json parse_json(std::string_view text, std::string_view source, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    throw UsageError(fmt::format("{}: {} bytes of JSON, over the {} allowed", source, text.size(), limits.max_bytes));
  // Keys seen in each open object (only when duplicates are refused).
  std::vector<std::set<std::string>> keys;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` counts the containers already open around this one.
        if (static_cast<size_t>(depth) + 1 > limits.max_depth)
          throw UsageError(fmt::format("{}: JSON nested deeper than {} levels", source, limits.max_depth));
        if (limits.refuse_duplicate_keys && event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (limits.refuse_duplicate_keys) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (limits.refuse_duplicate_keys && !keys.back().insert(parsed.get_ref<const std::string&>()).second)
          throw UsageError(fmt::format("{}: key {} appears twice in one object", source,
                                       describe_text(parsed.get_ref<const std::string&>())));
        break;
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::parse_error& e) {
    // nlohmann's message quotes the last token read, which may be long: keep the position only.
    throw UsageError(fmt::format("{}: not valid JSON (syntax error at byte {})", source, e.byte));
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}: not valid JSON ({})", source, describe_text(e.what(), 120)));
  }
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
std::string flat_and_short(const json& v, size_t max_chars) {
  std::string out = v.is_array() ? "[" : "{";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->is_structured() || it->is_binary() || out.size() > max_chars) return "";
    if (!first) out += ", ";
    first = false;
    if (v.is_object()) out += json(it.key()).dump(-1, ' ', true, json::error_handler_t::replace) + ": ";
    out += it->dump(-1, ' ', true, json::error_handler_t::replace);
  }
  out += v.is_array() ? "]" : "}";
  return out.size() <= max_chars ? out : "";
}

}  // namespace

std::string describe_json(const json& v) {
  if (v.is_structured() && !v.empty() && v.size() <= 8) {
    if (std::string flat = flat_and_short(v, 60); !flat.empty()) return flat;
  }
  switch (v.type()) {
    case json::value_t::object:
      return v.empty() ? "an empty object" : fmt::format("an object with {} key{}", v.size(), v.size() == 1 ? "" : "s");
    case json::value_t::array:
      return v.empty() ? "an empty array"
                       : fmt::format("an array of {} element{}", v.size(), v.size() == 1 ? "" : "s");
    case json::value_t::string: return fmt::format("\"{}\"", describe_text(v.get_ref<const std::string&>()));
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "a discarded value";
    default: return v.dump();  // null, booleans and numbers: short, no nesting
  }
}

}  // namespace zerodp
