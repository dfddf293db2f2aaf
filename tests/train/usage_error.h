// Helpers of the train tests: the message of the UsageError a call throws, and substring checks.
#pragma once

#include <string>
#include <utility>

#include "core/error.h"
#include "error_message.h"

namespace zerodp::train::testing {

// The UsageError message `fn` throws ("" when it throws nothing; other exceptions propagate).
template <typename Fn>
std::string usage_error(Fn&& fn) {
  return zerodp::testing::error_message<UsageError>(std::forward<Fn>(fn));
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace zerodp::train::testing
