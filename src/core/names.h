// An enum's names as data: one table of spellings per enum, the first spelling of a value the name it
// is shown by, every spelling accepted when parsed. Replaces a switch to print and an if-chain to parse
// written for each enum.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/strings.h"

namespace zerodp {

template <class E>
struct Spelling {
  E value;
  std::string_view text;
};

// The first spelling of `value`; "?" when the table has none.
template <class E, size_t N>
constexpr const char* name_of(const Spelling<E> (&table)[N], E value) {
  for (const Spelling<E>& s : table)
    if (s.value == value) return s.text.data();  // spellings are string literals: NUL-terminated
  return "?";
}

// The value `text` spells (ASCII case ignored when `ignore_case`), or nullopt.
template <class E, size_t N>
std::optional<E> find_spelling(const Spelling<E> (&table)[N], std::string_view text, bool ignore_case) {
  const std::string lowered = ignore_case ? to_lower(text) : std::string();
  for (const Spelling<E>& s : table)
    if (ignore_case ? to_lower(s.text) == lowered : s.text == text) return s.value;
  return std::nullopt;
}

}  // namespace zerodp
