// libFuzzer target: zerodp::data::AddedTrie, which finds a byte-level BPE's added tokens in a text
// (added_trie.h). The input is tokens separated by '\n', a NUL byte, then the text. At every position
// of the text, longest() must give the longest token that starts there, as a comparison with every
// token does; insert() must refuse exactly the repeated tokens; single_first_byte() and starts_with()
// must agree with the tokens' first bytes.
// Seeds (corpus/added_trie/): tokens that are prefixes of each other, special tokens sharing '<', bytes
// of every value.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/added_trie.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return 0;
  const std::string_view text = input.substr(nul + 1);
  zerodp::data::AddedTrie trie;
  std::vector<std::string> tokens;
  std::set<std::string> seen;
  std::set<int> firsts;
  for (size_t b = 0; b < nul;) {
    size_t e = input.find('\n', b);
    if (e == std::string_view::npos || e > nul) e = nul;
    const std::string token(input.substr(b, e - b));
    b = e + 1;
    if (token.empty()) continue;
    const bool fresh = seen.insert(token).second;
    if (trie.insert(token, static_cast<uint32_t>(tokens.size())) != fresh)
      zerodp::fuzz::property_failed("added_trie", "insert() and a set disagree on a repeated token");
    if (fresh) {
      tokens.push_back(token);
      firsts.insert(static_cast<uint8_t>(token[0]));
    } else {
      tokens.emplace_back();  // its index is unused
    }
  }
  const int single = firsts.size() == 1 ? *firsts.begin() : -1;
  if (trie.single_first_byte() != single) zerodp::fuzz::property_failed("added_trie", "single_first_byte() is wrong");
  for (int c = 0; c < 256; ++c)
    if (trie.starts_with(static_cast<uint8_t>(c)) != (firsts.count(c) == 1))
      zerodp::fuzz::property_failed("added_trie", "starts_with() is wrong");
  for (size_t at = 0; at < text.size(); ++at) {
    int32_t want = zerodp::data::AddedTrie::kNone;
    size_t want_len = 0;
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      if (!t.empty() && t.size() > want_len && text.substr(at, t.size()) == t) {
        want = static_cast<int32_t>(k);
        want_len = t.size();
      }
    }
    size_t len = 0;
    const int32_t got = trie.longest(text, at, len);
    if (got != want || (got != zerodp::data::AddedTrie::kNone && len != want_len))
      zerodp::fuzz::property_failed("added_trie", "longest() is not the longest token at a position");
  }
  return 0;
}
