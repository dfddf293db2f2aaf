// What every fuzz target does with an input: hand it to one reader and accept exactly one kind of
// failure, zerodp::Error, the documented answer to bad input (exit code 2 in the CLI). Anything else
// is a finding: a crash or sanitizer report ends the process by itself, and another exception is
// reported with its type and message before aborting, so that libFuzzer saves the input. (Letting it
// escape would also abort, through std::terminate, but without saying what was thrown.)
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "core/error.h"

namespace zerodp::fuzz {

template <class Body>
void only_zerodp_errors(const char* target, Body&& body) {
  try {
    body();
  } catch (const zerodp::Error&) {
    // Expected: the reader refused the input with a message.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_%s: unexpected exception %s: %s\n", target, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_%s: unexpected exception that is not a std::exception\n", target);
    std::abort();
  }
}

// A property of an accepted input that does not hold: a bug even though nothing crashed.
[[noreturn]] inline void property_failed(const char* target, const char* what) {
  std::fprintf(stderr, "fuzz_%s: property violated: %s\n", target, what);
  std::abort();
}

}  // namespace zerodp::fuzz
