// Small text helpers shared by the parsers of names and flags.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace zerodp {

// ASCII lower case (names of optimizers, schedules, units are ASCII).
inline std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace zerodp
