// Tokenizers (docs/reference/files.md#tokenizer-json): the byte tokenizer, a small hand-written
// byte-level BPE tokenizer.json (merge ranks, both merge forms, ignore_merges, added tokens and
// their flags, decode, each token's span), malformed files refused naming the file and the key, the
// token writer's headers (uint16 and uint32), and ids that do not depend on the thread count or on
// where big texts are cut. (The comparison with the Hugging Face library itself is tests/tokenizer.)
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "data/bpe.h"
#include "data/token_writer.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "data/tokens.h"

namespace zerodp::data {
namespace {

using nlohmann::json;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}
// The vocabulary string of some bytes (GPT-2's byte-to-character table).
std::string chars(std::string_view bytes) {
  std::string s;
  for (char c : bytes) s += utf8(byte_level_char(static_cast<uint8_t>(c)));
  return s;
}

const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A byte-level BPE: ids 0..255 the bytes (id = byte), then merges of `merges` (byte strings, in rank
// order) with ids 256, 257, ..., and <|endoftext|> last.
json tiny(const std::vector<std::pair<std::string, std::string>>& merges, bool pairs_form = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[chars(std::string(1, static_cast<char>(b)))] = b;
  json m = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(chars(a + b))) vocab[chars(a + b)] = next++;
    if (pairs_form) m.push_back(json::array({chars(a), chars(b)}));
    else m.push_back(chars(a) + " " + chars(b));
  }
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = json::array({{{"id", next}, {"content", "<|endoftext|>"}, {"single_word", false},
                                    {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}}});
  vocab["<|endoftext|>"] = next;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"},        {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                {"ignore_merges", false}, {"vocab", vocab}, {"merges", m}};
  return j;
}

std::unique_ptr<BpeTokenizer> load(const json& j, const std::string& name = "tokenizer 'tiny.json'") {
  return BpeTokenizer::from_json(j.dump(), name);
}

uint32_t id_of(const json& j, std::string_view bytes) { return j["model"]["vocab"][chars(bytes)].get<uint32_t>(); }

TEST(ByteTokenizer, OneTokenPerByte) {
  const auto t = byte_tokenizer();
  const std::string s = std::string("ab\0\xff", 4);
  const auto ids = t->encode(s);
  EXPECT_EQ(ids, (std::vector<uint32_t>{'a', 'b', 0, 255}));
  EXPECT_EQ(t->decode(ids), s);
  EXPECT_EQ(t->vocab_size(), 256);
  EXPECT_FALSE(t->eos_id().has_value());
  EXPECT_EQ(t->describe(), "bytes (V = 256)");
  const std::vector<uint32_t> bad{1, 256};
  EXPECT_THROW(t->decode(bad), UsageError);
}

TEST(BpeTokenizer, MergesByRankLowestFirst) {
  // "abc": with (a b) ranked first the result is [ab, c]; with (b c) first, [a, bc].
  const json j1 = tiny({{"a", "b"}, {"b", "c"}});
  EXPECT_EQ(load(j1)->encode("abc"), (std::vector<uint32_t>{id_of(j1, "ab"), 'c'}));
  const json j2 = tiny({{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(load(j2)->encode("abc"), (std::vector<uint32_t>{'a', id_of(j2, "bc")}));
  // Equal pairs: leftmost first ("aaa" -> [aa, a]).
  const json j3 = tiny({{"a", "a"}});
  EXPECT_EQ(load(j3)->encode("aaa"), (std::vector<uint32_t>{id_of(j3, "aa"), 'a'}));
}

TEST(BpeTokenizer, EncodesAndDecodesWords) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {" w", "o"}, {" wo", "r"}, {"l", "d"}};
  for (const bool pairs : {false, true}) {
    const json j = tiny(merges, pairs);
    const auto t = load(j);
    const std::string text = "hello world<|endoftext|>hello";
    const auto ids = t->encode(text);
    const std::vector<uint32_t> want = {id_of(j, "hello"), id_of(j, " wor"), id_of(j, "ld"), id_of(j, "<|endoftext|>"),
                                        id_of(j, "hello")};
    // (<|endoftext|> is an added token: its id is the vocab's)
    EXPECT_EQ(ids.size(), want.size());
    EXPECT_EQ(ids[0], want[0]);
    EXPECT_EQ(ids[1], want[1]);
    EXPECT_EQ(ids[2], want[2]);
    EXPECT_EQ(ids[3], j["model"]["vocab"]["<|endoftext|>"].get<uint32_t>());
    EXPECT_EQ(ids[4], want[4]);
    EXPECT_EQ(t->decode(ids), text);
    EXPECT_EQ(t->eos_id(), std::optional<uint32_t>(ids[3]));
    EXPECT_EQ(t->vocab_size(), static_cast<int64_t>(ids[3]) + 1);
    EXPECT_NE(t->describe().find("GPT-2 pattern"), std::string::npos) << t->describe();
    const std::vector<uint32_t> bad{static_cast<uint32_t>(t->vocab_size())};
    EXPECT_THROW(t->decode(bad), UsageError);
  }
}

TEST(BpeTokenizer, AnyBytesRoundTrip) {
  const auto t = load(tiny({{"a", "b"}}));
  std::string s;
  for (int b = 255; b >= 0; --b) s += static_cast<char>(b);
  s += "\xe4\xb8 ab \xf0\x9f\x91 ab\xc3";  // cut UTF-8 sequences
  EXPECT_EQ(t->decode(t->encode(s)), s);
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeWords) {
  json j = tiny({{"a", "b"}, {"c", "d"}});
  // "abcd" is in the vocabulary but no merge makes it.
  j["model"]["vocab"][chars("abcd")] = 400;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         json::array({{{"type", "Split"}, {"pattern", {{"Regex", kLlama3}}}, {"behavior", "Isolated"}, {"invert", false}},
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  EXPECT_EQ(load(j)->encode("abcd"), (std::vector<uint32_t>{id_of(j, "ab"), id_of(j, "cd")}));
  j["model"]["ignore_merges"] = true;
  const auto t = load(j);
  EXPECT_EQ(t->encode("abcd"), (std::vector<uint32_t>{400}));
  // Llama 3's pattern keeps the space with the word: " abcd" is not in the vocabulary, so merged.
  EXPECT_EQ(t->encode("abcd abcd"), (std::vector<uint32_t>{400, ' ', id_of(j, "ab"), id_of(j, "cd")}));
  EXPECT_NE(t->describe().find("Llama 3 pattern"), std::string::npos) << t->describe();
}

TEST(BpeTokenizer, AddedTokenFlags) {
  json j = tiny({});
  const uint32_t eot = j["model"]["vocab"]["<|endoftext|>"].get<uint32_t>();
  j["added_tokens"].push_back({{"id", eot + 1}, {"content", "[X]"}, {"single_word", false}, {"lstrip", true},
                               {"rstrip", true}, {"normalized", false}, {"special", true}});
  j["added_tokens"].push_back({{"id", eot + 2}, {"content", "cat"}, {"single_word", true}, {"lstrip", false},
                               {"rstrip", false}, {"normalized", true}, {"special", false}});
  const auto t = load(j);
  // lstrip/rstrip take the spaces around [X] into it.
  EXPECT_EQ(t->encode("a  [X]  b"), (std::vector<uint32_t>{'a', eot + 1, 'b'}));
  // single_word: "cat" alone is the token, inside a word it is not.
  EXPECT_EQ(t->encode("cat"), (std::vector<uint32_t>{eot + 2}));
  EXPECT_EQ(t->encode("a cat."), (std::vector<uint32_t>{'a', ' ', eot + 2, '.'}));
  EXPECT_EQ(t->encode("cats"), (std::vector<uint32_t>{'c', 'a', 't', 's'}));
  EXPECT_EQ(t->decode(std::vector<uint32_t>{eot + 1, eot + 2}), "[X]cat");
}

// Each kind of malformed file: a UsageError naming the file and the key.
std::vector<std::pair<size_t, size_t>> span_pairs(const std::vector<TokenSpan>& spans) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const TokenSpan& s : spans) out.push_back({s.begin, s.end});
  return out;
}

// encode_with_spans: the ids of encode, each with the bytes it stands for (the library's offsets, in
// bytes): whole characters, shared by the byte tokens of one; an added token's match; a ByteLevel
// post-processor's trim_offsets. (tests/data/chat_tokenize_reference.py holds them to the library.)
TEST(BpeTokenizer, SpansCoverWholeCharacters) {
  json j = tiny({{"h", "i"}, {"\xC3", "\xA9"}});  // "hi" 256, "é" 257, <|endoftext|> 258
  // GPT-2's regex: "hi", " é日" (bytes ' ', é's two merged, 日's three), <|endoftext|>, "x"
  const std::string text = "hi \xC3\xA9\xE6\x97\xA5<|endoftext|>x";
  std::vector<uint32_t> ids;
  std::vector<TokenSpan> spans;
  load(j)->encode_with_spans(text, ids, spans);
  EXPECT_EQ(ids, load(j)->encode(text));
  EXPECT_EQ(ids, (std::vector<uint32_t>{256, ' ', 257, 0xE6, 0x97, 0xA5, 258, 'x'}));
  EXPECT_EQ(span_pairs(spans), (std::vector<std::pair<size_t, size_t>>{
                                   {0, 2}, {2, 3}, {3, 5}, {5, 8}, {5, 8}, {5, 8}, {8, 21}, {21, 22}}));
  // char_to_token: the first token that holds the byte; none past the end.
  EXPECT_EQ(token_at(spans, 1), 0u);
  EXPECT_EQ(token_at(spans, 6), 3u);
  EXPECT_EQ(token_at(spans, 12), 6u);
  EXPECT_EQ(token_at(spans, 22), std::nullopt);
  // trim_offsets takes the spaces off: "a", " ", " b" (no " b" token: ' ' and 'b').
  j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}};
  ids.clear();
  spans.clear();
  load(j)->encode_with_spans("a  b", ids, spans);
  EXPECT_EQ(span_pairs(spans), (std::vector<std::pair<size_t, size_t>>{{0, 1}, {2, 2}, {3, 3}, {3, 4}}));
  // the byte tokenizer: a span a byte
  ids.clear();
  spans.clear();
  byte_tokenizer()->encode_with_spans("ab", ids, spans);
  EXPECT_EQ(span_pairs(spans), (std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 2}}));
}

TEST(BpeTokenizer, MalformedFilesNameFileAndKey) {
  struct Case {
    const char* name;
    void (*edit)(json&);
    const char* key;
  };
  const Case cases[] = {
      {"no model", [](json& j) { j.erase("model"); }, "model: missing"},
      {"merge not a string", [](json& j) { j["model"]["merges"][1] = 7; }, "model.merges[1]"},
      {"merge of three", [](json& j) { j["model"]["merges"][0] = "a b c"; }, "model.merges[0]"},
      {"merge pair of one", [](json& j) { j["model"]["merges"][0] = json::array({"a"}); }, "model.merges[0]"},
      {"merge unknown", [](json& j) { j["model"]["merges"][1] = "q z"; }, "model.merges[1]"},
      {"merge twice", [](json& j) { j["model"]["merges"][1] = j["model"]["merges"][0]; }, "model.merges[1]"},
      {"vocab array", [](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab"},
      {"vocab id string", [](json& j) { j["model"]["vocab"]["a"] = "1"; }, "model.vocab[a]"},
      {"vocab id huge", [](json& j) { j["model"]["vocab"]["a"] = int64_t{1} << 40; }, "model.vocab[a]"},
      {"vocab id twice", [](json& j) { j["model"]["vocab"]["a"] = 98; }, "id 98 is given to two tokens"},
      {"model type", [](json& j) { j["model"]["type"] = "Unigram"; }, "model.type"},
      {"byte fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, "model.byte_fallback"},
      {"ignore merges type", [](json& j) { j["model"]["ignore_merges"] = 1; }, "model.ignore_merges"},
      {"unk unknown", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, "model.unk_token"},
      {"suffix", [](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }, "model.end_of_word_suffix"},
      {"normalizer", [](json& j) { j["normalizer"] = {{"type", "Precompiled"}}; }, "normalizer"},
      {"pre-tokenizer", [](json& j) { j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}}; }, "pre_tokenizer.type"},
      {"metaspace without replacement", [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; },
       "pre_tokenizer.replacement"},
      {"split behavior",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Odd"}}; },
       "pre_tokenizer.behavior"},
      {"split regex",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "[a"}}}, {"behavior", "Isolated"}}; },
       "pre_tokenizer.pattern.Regex"},
      {"sequence step",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", 3}}})}}; },
       "pre_tokenizer.pretokenizers[0].type"},
      {"decoder", [](json& j) { j["decoder"] = nullptr; }, "decoder"},
      {"added id", [](json& j) { j["added_tokens"][0]["id"] = -4; }, "added_tokens[0].id"},
      {"added content", [](json& j) { j["added_tokens"][0]["content"] = ""; }, "added_tokens[0].content"},
      {"added flag", [](json& j) { j["added_tokens"][0]["lstrip"] = "yes"; }, "added_tokens[0].lstrip"},
      {"truncation", [](json& j) { j["truncation"] = {{"max_length", 5}}; }, "truncation"},
      // Without a ByteLevel pre-tokenizer the vocabulary is SentencePiece-style, which a ByteLevel
      // decoder does not fit.
      {"no pre-tokenizer", [](json& j) { j["pre_tokenizer"] = nullptr; }, "decoder.type"},
      {"no byte level",
       [](json& j) { j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}}; }, "decoder.type"},
  };
  for (const Case& c : cases) {
    json j = tiny({{"a", "b"}, {"b", "c"}});
    c.edit(j);
    try {
      load(j, "tokenizer 'bad.json'");
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("tokenizer 'bad.json'"), std::string::npos) << c.name << ": " << m;
      EXPECT_NE(m.find(c.key), std::string::npos) << c.name << ": " << m;
      EXPECT_LT(m.size(), 300u) << c.name << ": " << m;
    }
  }
  EXPECT_THROW(BpeTokenizer::from_json("{\"model\": [", "tokenizer 'bad.json'"), UsageError);
  EXPECT_THROW(BpeTokenizer::from_json("[]", "tokenizer 'bad.json'"), UsageError);
  // A value is never echoed whole.
  json j = tiny({{"a", "b"}});
  j["model"]["merges"][0] = std::string(100000, 'x');
  try {
    load(j);
    ADD_FAILURE() << "accepted a 100 kB merge";
  } catch (const UsageError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
  }
}

TEST(BpeTokenizer, LoadTokenizerBoundsTheFile) {
  EXPECT_THROW(load_tokenizer("/nonexistent/tokenizer.json"), UsageError);
  const std::string p = std::filesystem::temp_directory_path() / ("zerodp_tok_big_" + std::to_string(::getpid()));
  {
    AtomicFile f(p);
    const std::string spaces(1 << 20, ' ');
    for (int i = 0; i < 65; ++i) f.write(spaces);
    f.commit();
  }
  try {
    load_tokenizer(p);
    ADD_FAILURE() << "read a 65 MiB tokenizer.json";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  std::filesystem::remove(p);
}

class TokenizeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("zerodp_tokenize_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(TokenizeFiles, WriterHeadersUint16AndUint32) {
  const std::vector<uint32_t> ids = {0, 1, 65535, 7};
  write_tokens(path("a.bin"), ids, 65536);
  const std::string a = read_file(path("a.bin"));
  ASSERT_EQ(a.size(), 1024u + 4 * 2);
  EXPECT_EQ(a.substr(0, 1024), token_file_header(4, 1));
  EXPECT_EQ(read_tokens(path("a.bin"), 65536), ids);
  EXPECT_EQ(TokenFile::open(path("a.bin"), 65536).size(), 4u);  // the trainer's reader takes version 1

  const std::vector<uint32_t> big = {0, 65536, 100000, 3};
  write_tokens(path("b.bin"), big, 100001);
  const std::string b = read_file(path("b.bin"));
  ASSERT_EQ(b.size(), 1024u + 4 * 4);
  EXPECT_EQ(b.substr(0, 1024), token_file_header(4, 2));
  EXPECT_EQ(static_cast<uint8_t>(b[4]), 2);
  EXPECT_EQ(read_tokens(path("b.bin"), 100001), big);
  EXPECT_THROW(read_tokens(path("b.bin"), 100000), UsageError);  // 100000 is not below 100000

  // Streaming: the count is patched at commit; nothing is visible before.
  {
    TokenWriter w(path("c.bin"), 1000);
    for (uint32_t i = 0; i < 1000; ++i) w.append(std::vector<uint32_t>{i, i});
    EXPECT_FALSE(file_exists(path("c.bin")));
    w.commit();
  }
  EXPECT_EQ(read_tokens(path("c.bin"), 1000).size(), 2000u);
  EXPECT_EQ(token_file_version(65536), 1);
  EXPECT_EQ(token_file_version(65537), 2);
  TokenWriter empty(path("d.bin"), 10);
  EXPECT_THROW(empty.commit(), UsageError);
  EXPECT_FALSE(file_exists(path("d.bin")));
}

json llama3_style() {
  json j = tiny({{"t", "h"}, {"th", "e"}, {" ", "t"}, {" t", "h"}, {" th", "e"}, {"e", "r"}, {"\n", "\n"}, {"a", "n"}});
  j["model"]["ignore_merges"] = true;
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         json::array({{{"type", "Split"}, {"pattern", {{"Regex", kLlama3}}}, {"behavior", "Isolated"}, {"invert", false}},
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  return j;
}

TEST_F(TokenizeFiles, IdsDoNotDependOnThreadsOrCuts) {
  std::string text;
  const char* lines[] = {"the other  \n", "Then there\n\n", "  indented line   \r\n", "<|endoftext|>and\n", "123456 \n",
                         "x\n \nY\n", "\t\n", "émigré\n", "中文\n"};
  for (int i = 0; i < 3000; ++i) text += lines[(i * 7) % 9];
  write_file_atomic(path("t.txt"), text);
  for (const json& j : {tiny({{"t", "h"}, {"th", "e"}, {" ", "t"}}), llama3_style()}) {
    const auto tok = load(j);
    std::vector<uint32_t> want = {*tok->eos_id()};
    tok->encode(text, want);
    std::vector<TextChunk> chunks;
    tok->chunk(text, 100, chunks);
    EXPECT_GT(chunks.size(), 100u);  // cut at added tokens, and after '\n' before letters
    for (const int threads : {1, 2, 3}) {
      for (const size_t chunk : {size_t{37}, size_t{1000}, size_t{1} << 20}) {
        TokenizeOptions o;
        o.texts = {path("t.txt")};
        o.threads = threads;
        o.chunk_bytes = chunk;
        EXPECT_EQ(tokenize_to_ids(*tok, o), want) << threads << " threads, chunks of " << chunk;
      }
    }
  }
}

TEST_F(TokenizeFiles, ShardsJsonLinesAndFailuresLeaveOutputsAlone) {
  const auto tok = load(llama3_style());
  const uint32_t eos = *tok->eos_id();
  std::string jl;
  std::vector<uint32_t> want;
  for (int i = 0; i < 200; ++i) {
    const std::string doc = "the other " + std::to_string(i) + (i % 3 ? "\nthen" : "");
    jl += json({{"text", doc}}).dump() + (i % 50 ? "\n" : "\n\n");
    want.push_back(eos);
    tok->encode(doc, want);
  }
  write_file_atomic(path("d.jsonl"), jl);
  TokenizeOptions o;
  o.texts = {path("d.jsonl")};
  o.out_prefix = path("s");
  o.shard_tokens = 500;
  o.val_tokens = 123;
  o.threads = 2;
  o.chunk_bytes = 300;
  o.progress = false;
  const TokenizeResult r = tokenize_files(*tok, o);
  EXPECT_EQ(r.tokens, want.size());
  EXPECT_EQ(r.documents, 200u);
  std::vector<uint32_t> stream = read_tokens(path("s_val_000000.bin"), tok->vocab_size());
  EXPECT_EQ(stream.size(), 123u);
  size_t shards = 0;
  for (;; ++shards) {
    const std::string p = path(fmt::format("s_train_{:06d}.bin", shards));
    if (!file_exists(p)) break;
    const auto ids = read_tokens(p, tok->vocab_size());
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(shards, (want.size() - 123 + 499) / 500);
  EXPECT_EQ(stream, want);
  EXPECT_EQ(r.files.size(), shards + 1);

  // A bad line later on: an error naming the file and line, and the earlier shards untouched.
  const std::string before = read_file(path("s_train_000000.bin"));
  write_file_atomic(path("bad.jsonl"), "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"txt\": 1}\n");
  o.texts = {path("d.jsonl"), path("bad.jsonl")};
  try {
    tokenize_files(*tok, o);
    ADD_FAILURE() << "accepted a line without text";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl' line 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(path("s_train_000000.bin")), before);

  // Fewer shards than before: the stale ones go.
  o.texts = {path("d.jsonl")};
  o.shard_tokens = 100000;
  o.val_tokens = 0;
  tokenize_files(*tok, o);
  EXPECT_TRUE(file_exists(path("s_train_000000.bin")));
  EXPECT_FALSE(file_exists(path("s_train_000001.bin")));
  EXPECT_FALSE(file_exists(path("s_val_000000.bin")));
  EXPECT_EQ(read_tokens(path("s_train_000000.bin"), tok->vocab_size()), want);

  // Usage: --out with --out-prefix, neither, shard size, more val tokens than the stream.
  TokenizeOptions bad = o;
  bad.out = path("x.bin");
  EXPECT_THROW(tokenize_files(*tok, bad), UsageError);
  bad = o;
  bad.out_prefix.clear();
  EXPECT_THROW(tokenize_files(*tok, bad), UsageError);
  bad = o;
  bad.shard_tokens = 0;
  EXPECT_THROW(tokenize_files(*tok, bad), UsageError);
  bad = o;
  bad.val_tokens = static_cast<int64_t>(want.size());
  EXPECT_THROW(tokenize_files(*tok, bad), UsageError);
  bad = o;
  bad.texts.push_back(path("missing.txt"));
  EXPECT_THROW(tokenize_files(*tok, bad), UsageError);
}

TEST_F(TokenizeFiles, LargeVocabularyWritesUint32) {
  json j = tiny({{"a", "b"}});
  for (int i = 0; i < 70000; ++i) j["model"]["vocab"][fmt::format("w{}", i)] = 258 + i;
  const auto tok = load(j);
  ASSERT_EQ(tok->vocab_size(), 70258);
  write_file_atomic(path("t.txt"), "ab w69999 c");
  TokenizeOptions o;
  o.texts = {path("t.txt")};
  o.out = path("t.bin");
  o.progress = false;
  tokenize_files(*tok, o);
  const std::string bytes = read_file(path("t.bin"));
  EXPECT_EQ(bytes.substr(0, 1024).substr(4, 4), std::string("\x02\0\0\0", 4));  // header [1] = 2: uint32
  std::vector<uint32_t> want = {*tok->eos_id()};
  tok->encode("ab w69999 c", want);
  EXPECT_EQ(read_tokens(path("t.bin"), tok->vocab_size()), want);
  EXPECT_EQ(bytes.size(), 1024 + 4 * want.size());
  detokenize_file(*tok, path("t.bin"), path("back.txt"));
  EXPECT_EQ(read_file(path("back.txt")), "<|endoftext|>ab w69999 c");
}

TEST_F(TokenizeFiles, ByteTokenizerMatchesTokenizeBytes) {
  std::string text = "First Citizen:\nBefore we proceed";
  text += std::string("\xc3\xa9\0", 3);
  write_file_atomic(path("t.txt"), text);
  tokenize_bytes(path("t.txt"), path("a.bin"));
  const auto tok = byte_tokenizer();
  TokenizeOptions o;
  o.texts = {path("t.txt")};
  o.out = path("b.bin");
  o.chunk_bytes = 5;
  o.progress = false;
  EXPECT_EQ(tokenize_files(*tok, o).tokens, text.size());
  EXPECT_EQ(read_file(path("a.bin")), read_file(path("b.bin")));
  detokenize_file(*tok, path("b.bin"), path("back.txt"));
  EXPECT_EQ(read_file(path("back.txt")), text);
}

}  // namespace
}  // namespace zerodp::data
