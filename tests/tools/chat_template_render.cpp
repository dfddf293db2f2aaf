// chat_template_render: renders chat templates with data/chat_template.h for the reference test
// against transformers (tests/data/chat_template_reference.py). Reads JSON Lines, one case a line:
//   {"config": {tokenizer_config.json's chat_template and special tokens}, "messages": [...],
//    "add_generation_prompt": bool, "variables": {...}, "now": [year, month, day, hour, minute, second]}
// and writes one JSON line a case: {"text": ..., "generation": [[begin, end], ...]} (byte offsets) or
// {"error": message}. Exit 0 unless a line is not JSON or the output cannot be written.
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "json_lines_cases.h"

int main(int argc, char** argv) {
  using nlohmann::ordered_json;
  (void)argv;
  // ordered_json: the messages' keys keep their order, as Python's dicts do.
  return zerodp::testing::run_json_lines<ordered_json>(
      argc, "usage: chat_template_render < cases.jsonl > results.jsonl\n", [](const ordered_json& in, int lineno) {
        const zerodp::data::ChatTemplate t = zerodp::data::ChatTemplate::from_tokenizer_config(
            nlohmann::json::parse(in.at("config").dump()), "case " + std::to_string(lineno));
        zerodp::data::ChatRenderOptions options;
        options.add_generation_prompt = in.value("add_generation_prompt", false);
        if (in.contains("variables")) options.variables = in["variables"];
        if (in.contains("now")) {
          const auto& n = in["now"];
          std::tm tm{};
          tm.tm_year = n[0].get<int>() - 1900;
          tm.tm_mon = n[1].get<int>() - 1;
          tm.tm_mday = n[2].get<int>();
          tm.tm_hour = n[3].get<int>();
          tm.tm_min = n[4].get<int>();
          tm.tm_sec = n[5].get<int>();
          std::mktime(&tm);  // fills in the weekday and the day of the year
          options.now = tm;
        }
        const zerodp::data::ChatRendered r = t.render(in.at("messages"), options);
        ordered_json result;
        result["text"] = r.text;
        result["generation"] = ordered_json::array();
        for (const auto& [b, e] : r.generation) result["generation"].push_back({b, e});
        return result;
      });
}
