// Work linear in the input (docs/limits.md#tokenizers): added tokens found through a trie with the
// ids of tokenizers' leftmost-longest matching (many tokens, tokens that are prefixes of each other,
// the two passes of normalized and not normalized tokens), 300,000 added tokens loaded, and the regex
// budget: a lookahead that rescans the text at every position is refused naming its pattern, while
// GPT-2's and Llama 3's patterns on long runs of one kind of character are not.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/added_trie.h"
#include "data/bpe.h"
#include "data/bpe_regex.h"

namespace zerodp::data {
namespace {

using nlohmann::json;

// The vocabulary string of byte b (GPT-2's byte-to-character table), in UTF-8.
std::string byte_string(uint8_t b) {
  const uint32_t cp = byte_level_char(b);
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct Added {
  std::string content;
  bool normalized = false, lstrip = false, rstrip = false, special = true;
};

// A byte-level BPE without merges (id = byte) whose added tokens get ids 256, 257, ... in order.
json bytes_tokenizer(const std::vector<Added>& added, const std::string& pattern = kGpt2Pattern) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_string(static_cast<uint8_t>(b))] = b;
  json list = json::array();
  for (size_t i = 0; i < added.size(); ++i) {
    const Added& a = added[i];
    list.push_back({{"id", 256 + i}, {"content", a.content}, {"single_word", false}, {"lstrip", a.lstrip},
                    {"rstrip", a.rstrip}, {"normalized", a.normalized}, {"special", a.special}});
  }
  json j;
  j["added_tokens"] = list;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"},
                                       {"invert", false}},
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}};
  return j;
}

std::vector<uint32_t> encode(const BpeTokenizer& t, std::string_view text) {
  std::vector<uint32_t> ids;
  t.encode(text, ids);
  return ids;
}

// The ids of `text` when every byte is its own token but the added tokens at the given offsets.
std::vector<uint32_t> expect(std::string_view text, const std::vector<std::pair<size_t, std::pair<size_t, uint32_t>>>& at) {
  std::vector<uint32_t> ids;
  size_t i = 0, k = 0;
  while (i < text.size()) {
    if (k < at.size() && at[k].first == i) {
      ids.push_back(at[k].second.second);
      i += at[k].second.first;
      ++k;
    } else {
      ids.push_back(static_cast<uint8_t>(text[i++]));
    }
  }
  return ids;
}

TEST(AddedTrie, LongestTokenAtAPosition) {
  AddedTrie trie;
  EXPECT_TRUE(trie.empty());
  EXPECT_TRUE(trie.insert("ab", 0));
  EXPECT_TRUE(trie.insert("abcd", 1));
  EXPECT_TRUE(trie.insert("b", 2));
  EXPECT_FALSE(trie.insert("ab", 3));  // the same bytes twice
  size_t len = 0;
  EXPECT_EQ(trie.longest("abcd", 0, len), 1);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(trie.longest("abce", 0, len), 0);  // abcd fails at its last byte: the prefix ab
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(trie.longest("abce", 1, len), 2);
  EXPECT_EQ(trie.longest("abce", 2, len), AddedTrie::kNone);
  EXPECT_EQ(trie.longest("a", 0, len), AddedTrie::kNone);
  EXPECT_TRUE(trie.starts_with('a'));
  EXPECT_FALSE(trie.starts_with('c'));
  EXPECT_EQ(trie.single_first_byte(), -1);
  AddedTrie one;
  for (uint32_t i = 0; i < 5000; ++i) ASSERT_TRUE(one.insert(fmt::format("<{}>", i), i));
  EXPECT_EQ(one.single_first_byte(), '<');
  EXPECT_EQ(one.longest("x<4999>", 1, len), 4999);
  EXPECT_EQ(len, 6u);
}

// Tokens that are prefixes of each other and overlap: leftmost first, then the longest there
// (tokenizers' Aho-Corasick with MatchKind::LeftmostLongest), whatever their order in the file.
TEST(BpeAddedTokens, OverlappingTokensLeftmostLongest) {
  const auto t = BpeTokenizer::from_json(
      bytes_tokenizer({{"abcd"}, {"ab"}, {"bcdef"}, {"abc"}, {"cd"}, {"x"}, {"xy"}}).dump(), "tokenizer 'overlap'");
  EXPECT_EQ(encode(*t, "abcdef"), expect("abcdef", {{0, {4, 256}}}));   // abcd, not ab or bcdef
  EXPECT_EQ(encode(*t, "abcx"), expect("abcx", {{0, {3, 259}}, {3, {1, 261}}}));
  EXPECT_EQ(encode(*t, "zbcdefg"), expect("zbcdefg", {{1, {5, 258}}}));  // bcdef starts first
  EXPECT_EQ(encode(*t, "abxyz"), expect("abxyz", {{0, {2, 257}}, {2, {2, 262}}}));
  EXPECT_EQ(encode(*t, "aabcc"), expect("aabcc", {{1, {3, 259}}}));
}

// With normalized and not normalized tokens, the latter are split out first (tokenizers'
// split_with_indices on the raw text, then the normalized one): "bc" wins over an earlier "ab".
TEST(BpeAddedTokens, NotNormalizedTokensFirst) {
  const auto t = BpeTokenizer::from_json(
      bytes_tokenizer({{"ab", true, false, false, false}, {"bc", false}}).dump(), "tokenizer 'passes'");
  EXPECT_EQ(encode(*t, "abc"), expect("abc", {{1, {2, 257}}}));
  EXPECT_EQ(encode(*t, "abxbc"), expect("abxbc", {{0, {2, 256}}, {3, {2, 257}}}));
  const auto one = BpeTokenizer::from_json(
      bytes_tokenizer({{"ab", true, false, false, false}, {"bc", true, false, false, false}}).dump(), "tokenizer 'one'");
  EXPECT_EQ(encode(*one, "abc"), expect("abc", {{0, {2, 256}}}));
}

// 300,000 added tokens (a minute to load before the trie, quadratic in their number): the last one,
// one that is a prefix of others and a near miss all find their ids.
TEST(BpeAddedTokens, ThreeHundredThousandTokens) {
  constexpr size_t kTokens = 300000;
  std::vector<Added> added;
  added.reserve(kTokens);
  for (size_t i = 0; i < kTokens; ++i) added.push_back({fmt::format("<|extra_{}|>", i)});
  const auto t = BpeTokenizer::from_json(bytes_tokenizer(added).dump(), "tokenizer 'many'");
  EXPECT_EQ(t->vocab_size(), static_cast<int64_t>(256 + kTokens));
  const std::string text = "a<|extra_299999|>b<|extra_1|><|extra_12|>c<|extra_3000000|><|extra_7|";
  const auto ids = encode(*t, text);
  EXPECT_EQ(ids, expect(text, {{1, {16, 256 + 299999}}, {18, {11, 256 + 1}}, {29, {12, 256 + 12}}}));
  EXPECT_EQ(t->decode(ids), text);
  // A repeated content is still refused, naming the later entry.
  added.push_back({"<|extra_17|>"});
  try {
    BpeTokenizer::from_json(bytes_tokenizer(added).dump(), "tokenizer 'dup'");
    FAIL() << "a repeated added token was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("added_tokens[300000].content"), std::string::npos) << e.what();
  }
}

// A lookahead that scans to the end of the text from every position: quadratic, minutes a megabyte
// before the budget; now a UsageError naming the pattern (cut) and the key, within a second or so.
TEST(RegexBudget, RescanningLookaheadIsRefused) {
  const std::string pattern = "a(?=.*b)|a" + std::string(100, 'z') + "?";
  const auto t = BpeTokenizer::from_json(bytes_tokenizer({}, pattern).dump(), "tokenizer 'rescan.json'");
  const std::string text(1 << 20, 'a');
  try {
    encode(*t, text);
    FAIL() << "the rescanning pattern ran to the end";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tokenizer 'rescan.json': pre_tokenizer.pretokenizers[0].pattern.Regex"), std::string::npos) << msg;
    EXPECT_NE(msg.find("a(?=.*b)|a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs more work than a text of 1048576 bytes"), std::string::npos) << msg;
    EXPECT_EQ(msg.find(std::string(100, 'z')), std::string::npos) << "the pattern is echoed whole";
  }
  // The same pattern on a short text is within the budget.
  EXPECT_EQ(encode(*t, "aab").size(), 3u);
}

// Ordinary patterns on runs longer than the free window: found whole, within the budget.
TEST(RegexBudget, LongRunsOfOrdinaryPatternsFit) {
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  for (const std::string& pattern : {std::string(kGpt2Pattern), llama3}) {
    const std::string runs = std::string(3 << 20, ' ') + "x" + std::string(1 << 20, '\n') + std::string(1 << 20, 'y') +
                             std::string(1 << 20, '7') + std::string(1000, '!') + " z";
    Regex re(pattern, "test");
    RegexBudget budget(runs.size());
    size_t pos = 0, ms = 0, me = 0, matches = 0;
    while (pos < runs.size() && re.find(runs.data(), runs.size(), pos, ms, me, budget)) {
      ASSERT_GT(me, ms);
      pos = me;
      ++matches;
    }
    EXPECT_EQ(pos, runs.size()) << pattern;
    EXPECT_LT(budget.used(), budget.limit() / 4) << pattern;
    EXPECT_LT(matches, 400000u) << pattern;  // runs are matched whole (digits three at a time in Llama 3)
  }
}

// A match that ends exactly at a window's edge, or needs a lookahead past it, is the one a search of
// the whole text finds.
TEST(RegexBudget, WindowEdgesChangeNothing) {
  Regex re(R"(\s+(?!\S)|\s+|\w+(?=;)|\w+|;)", "test");
  for (size_t at = Regex::kWindow - 3; at <= Regex::kWindow + 3; ++at) {
    const std::string text = std::string(at, 'w') + ";" + std::string(at, ' ') + "v";
    RegexBudget budget(text.size());
    size_t ms = 0, me = 0;
    ASSERT_TRUE(re.find(text.data(), text.size(), 0, ms, me, budget));
    EXPECT_EQ(ms, 0u);
    EXPECT_EQ(me, at);
    ASSERT_TRUE(re.find(text.data(), text.size(), at + 1, ms, me, budget));
    EXPECT_EQ(me, 2 * at);  // the last space goes with the word (the lookahead past the window)
  }
  // Letters of 2 and 3 bytes across the window's end: a run of them is one match (a window cut inside
  // a character would have PCRE2 take the cut character for an invalid one, and end the run there).
  Regex letters(R"( ?\p{L}+|\p{N}+| )", "test");
  for (const std::string& ch : {std::string("é"), std::string("中")}) {
    for (size_t lead = 0; lead < 3; ++lead) {
      std::string text = std::string(lead, '1') + " ";
      for (size_t i = 0; i < 400; ++i) text += ch;
      RegexBudget budget(text.size());
      size_t ms = 0, me = 0;
      ASSERT_TRUE(letters.find(text.data(), text.size(), lead, ms, me, budget));
      EXPECT_EQ(ms, lead);
      EXPECT_EQ(me, text.size()) << "a run of " << ch << " after " << lead << " digits";
    }
  }
}

// A stray continuation byte just past a window's end: one search of the whole text (PCRE2 10.42, JIT)
// matches \b after it, at the start of the next valid run, not before it; a search restarted at it saw
// the 'y' before and matched \b there (the fuzz target's finding of 2026-11-30). (A stray 0xFF is not
// the same to PCRE2: it matches \b before that one. The fuzz target compares every such case.)
TEST(RegexBudget, NoMatchInsideAnInvalidSequence) {
  Regex re(R"(\b|a)", "test");
  for (const char stray : {'\x8e', '\xbf'}) {
    // the search from 3: its first window ends at the stray byte
    const std::string text = "a " + std::string(Regex::kWindow + 1, 'y') + stray + "yy";
    const size_t at = 3 + Regex::kWindow;  // the stray byte
    RegexBudget budget(text.size());
    size_t ms = 0, me = 0;
    ASSERT_TRUE(re.find(text.data(), text.size(), 3, ms, me, budget));  // inside the run of y
    EXPECT_EQ(ms, at + 1) << "after the stray byte " << static_cast<int>(static_cast<uint8_t>(stray));
    EXPECT_EQ(me, at + 1);
  }
}

}  // namespace
}  // namespace zerodp::data
