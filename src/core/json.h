// JSON from outside the process (safetensors headers, checkpoint manifests, DeepSpeed configs),
// parsed within bounds and described briefly.
//
// nlohmann's parser is iterative, but much of what one does with a parsed value afterwards (dump,
// comparison, copies) recurses once per level: a header nested 100,000 deep parses fine and then
// overflows the stack when printed. parse_json() refuses such documents while parsing, before the
// value is built, and describe_json() never recurses, so an error message stays short and safe
// whatever the value holds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zerodp {

struct JsonLimits {
  size_t max_depth = 32;                // nesting of objects and arrays (the top level is depth 1)
  size_t max_bytes = size_t{16} << 20;  // the text's length
  bool refuse_duplicate_keys = false;   // nlohmann keeps one of two equal keys silently
};

// Parses `text`; `source` names it in messages ("'ds.json'", "'model.safetensors' header"). A
// UsageError (exit 2) for text over max_bytes, nesting deeper than max_depth, a duplicate key when
// refused, or text that is not JSON (with the byte offset where it went wrong).
nlohmann::json parse_json(std::string_view text, std::string_view source, const JsonLimits& limits = {});
// The same, keeping each object's keys in the order of the text (as Python's dicts do): for values
// handed on to code that sees the order, such as a chat template's `tojson` or `items()`.
nlohmann::ordered_json parse_ordered_json(std::string_view text, std::string_view source,
                                          const JsonLimits& limits = {});

// A description of a JSON value for error messages, at most about 80 characters and never
// recursive: numbers, booleans and null as written, strings quoted and cut ("\"abc...\" (4000
// bytes)"), short containers of scalars as written ("[0.9, \"x\"]"), other containers by size
// ("an array of 3 elements", "an object with 5 keys").
std::string describe_json(const nlohmann::json& v);
std::string describe_json(const nlohmann::ordered_json& v);

// At most `max_chars` characters of `s` (cut on a UTF-8 boundary), control characters escaped,
// with "..." and the full length when cut: for echoing names and values taken from files.
std::string describe_text(std::string_view s, size_t max_chars = 48);

}  // namespace zerodp
