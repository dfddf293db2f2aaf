// token_spans: the ids and spans of Tokenizer::encode_with_spans, for the reference test against the
// `tokenizers` library's offsets (tests/data/chat_tokenize_reference.py). Reads JSON Lines, one case a
// line: {"tokenizer": "path/tokenizer.json", "text": "..."}, and writes one JSON line a case:
// {"ids": [...], "spans": [[begin, end], ...]} (byte offsets in the text's UTF-8) or {"error": message}.
// Exit 0 unless a line is not JSON or the output cannot be written.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "json_lines_cases.h"

int main(int argc, char** argv) {
  using nlohmann::json;
  (void)argv;
  std::map<std::string, std::unique_ptr<zerodp::data::Tokenizer>> loaded;
  return zerodp::testing::run_json_lines<json>(argc, "usage: token_spans < cases.jsonl > results.jsonl\n",
                                               [&](const json& in, int) {
                                                 const std::string path = in.at("tokenizer").get<std::string>();
                                                 auto& tok = loaded[path];
                                                 if (!tok) tok = zerodp::data::load_tokenizer(path);
                                                 std::vector<uint32_t> ids;
                                                 std::vector<zerodp::data::TokenSpan> spans;
                                                 tok->encode_with_spans(in.at("text").get<std::string>(), ids, spans);
                                                 json result;
                                                 result["ids"] = ids;
                                                 result["spans"] = json::array();
                                                 for (const auto& s : spans)
                                                   result["spans"].push_back({s.begin, s.end});
                                                 return result;
                                               });
}
