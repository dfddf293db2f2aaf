// Errors: every failure zerodp reports is an Error carrying the process exit code it maps to
// (docs/reference/command-line.md#exit-codes): 2 for bad usage, configuration or input files, 3 for the memory budget, 1 for
// anything that goes wrong while running.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace zerodp {

enum class ExitCode : int { kOk = 0, kFailure = 1, kUsage = 2, kBudget = 3 };

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Bad flags, configuration values or input files: exit code 2. The message says what and where.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(ExitCode::kUsage, what) {}
};

// An allocation that would take a rank over its --memory-budget: exit code 3.
class BudgetError : public Error {
 public:
  explicit BudgetError(const std::string& what) : Error(ExitCode::kBudget, what) {}
};

// A failure while running (communication, I/O, broken invariants): exit code 1.
class RuntimeFailure : public Error {
 public:
  explicit RuntimeFailure(const std::string& what) : Error(ExitCode::kFailure, what) {}
};

// Maps any exception to the exit code it should end the process with.
inline int exit_code_of(const std::exception& e) {
  if (auto* z = dynamic_cast<const Error*>(&e)) return static_cast<int>(z->code());
  return static_cast<int>(ExitCode::kFailure);
}

}  // namespace zerodp

// ZDP_CHECK(cond, "format {}", args...): an invariant of the program; throws RuntimeFailure with the
// source location when it does not hold.
#define ZDP_CHECK(cond, ...)                                                                    \
  do {                                                                                          \
    if (!(cond)) [[unlikely]]                                                                   \
      throw ::zerodp::RuntimeFailure(fmt::format("{}:{}: check '{}' failed: {}", __FILE__,      \
                                                 __LINE__, #cond, fmt::format(__VA_ARGS__)));   \
  } while (0)

// ZDP_REQUIRE(cond, "format {}", args...): a condition on user input; throws UsageError (exit 2).
#define ZDP_REQUIRE(cond, ...)                                              \
  do {                                                                      \
    if (!(cond)) [[unlikely]]                                               \
      throw ::zerodp::UsageError(fmt::format(__VA_ARGS__));                 \
  } while (0)
