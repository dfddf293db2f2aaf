// For tests of every layer: the message of the exception of type E a call throws ("" when it throws
// none; other exceptions propagate), so that a test can check what a refusal says.
#pragma once

#include <string>

namespace zerodp::testing {

template <class E, class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace zerodp::testing
