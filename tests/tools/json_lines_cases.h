// For the tools that the reference tests drive with JSON Lines (chat_template_render, token_spans): one
// case a line of stdin, one JSON line of result a case on stdout, {"error": message} for a case that
// zerodp refuses (a zerodp::Error).
#pragma once

#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zerodp::testing {

// Runs `one_case(case, line number)` (returning the result, a Json) on each line. Exit status: 2 for
// arguments given or a line that is not JSON or lacks what the case reads (a nlohmann exception), 1
// when the output cannot be written, else 0.
template <class Json, class OneCase>
int run_json_lines(int argc, const char* usage, OneCase&& one_case) {
  if (argc != 1) {
    std::cerr << usage;
    return 2;
  }
  std::string line;
  int lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    Json result;
    try {
      result = one_case(Json::parse(line), lineno);
    } catch (const nlohmann::json::exception& e) {
      std::cerr << "line " << lineno << ": " << e.what() << "\n";
      return 2;
    } catch (const zerodp::Error& e) {
      result = Json{{"error", e.what()}};
    }
    std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) << "\n";
  }
  return std::cout.good() ? 0 : 1;
}

}  // namespace zerodp::testing
