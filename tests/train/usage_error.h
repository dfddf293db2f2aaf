// Helpers of the train tests: the message of the UsageError a call throws, and substring checks.
#pragma once

#include <string>

#include "core/error.h"

namespace zerodp::train::testing {

// The UsageError message `fn` throws ("" when it throws nothing; other exceptions propagate).
template <typename Fn>
std::string usage_error(Fn&& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace zerodp::train::testing
