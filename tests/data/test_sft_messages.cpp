// `tokenize --sft` on {"messages"} lines (data/instruction_tokenize.h, data/chat_labels.h):
// transformers' mask rule for ranges of the tokens' spans, the labels of
// conversations rendered by a chat template with and without {% generation %} blocks, the fallback's
// rule for finding assistant turns, mixed files, and the refusals naming the file and line. (The
// comparison with transformers itself is tests/data/chat_tokenize_reference.py.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "data/bpe.h"
#include "data/chat_labels.h"
#include "data/instruction_data.h"
#include "data/instruction_tokenize.h"
#include "data/tokenizer.h"
#include "error_message.h"
#include "temp_dir.h"

namespace zerodp::data {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The UTF-8 of one code point below U+0800 (GPT-2's byte characters are below U+0144).
std::string sft_utf8(uint32_t cp) {
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// A byte-level BPE whose ids 0..255 are the bytes, with the merge "h"+"i" (256), and the added tokens
// `added` from id 257 on (<|im_start|>, <|im_end|>, ...).
std::unique_ptr<Tokenizer> sft_tokenizer(const std::vector<std::string>& added) {
  json vocab = json::object();
  auto chars = [](std::string_view bytes) {
    std::string s;
    for (char c : bytes) s += sft_utf8(byte_level_char(static_cast<uint8_t>(c)));
    return s;
  };
  for (int b = 0; b < 256; ++b) vocab[chars(std::string(1, static_cast<char>(b)))] = b;
  vocab[chars("hi")] = 256;
  json added_tokens = json::array();
  for (size_t i = 0; i < added.size(); ++i) {
    added_tokens.push_back({{"id", 257 + i},
                            {"content", added[i]},
                            {"single_word", false},
                            {"lstrip", false},
                            {"rstrip", false},
                            {"normalized", false},
                            {"special", true}});
    vocab[added[i]] = 257 + i;
  }
  json j;
  j["added_tokens"] = added_tokens;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({chars("h") + " " + chars("i")})}};
  return BpeTokenizer::from_json(j.dump(), "tokenizer 'sft.json'");
}

// transformers' rule: from the token of a range's first byte to the token of its last; to the end
// when that is none or token 0; no token for the first byte ends the marking.
TEST(ChatLabels, MaskAsTransformers) {
  const std::vector<TokenSpan> spans = {{0, 2}, {2, 4}, {4, 6}, {6, 8}};
  const std::vector<TextRange> one = {{3, 6}};
  EXPECT_EQ(assistant_mask(spans, one), (std::vector<uint8_t>{0, 1, 1, 0}));
  const std::vector<TextRange> past_end = {{5, 12}};
  EXPECT_EQ(assistant_mask(spans, past_end), (std::vector<uint8_t>{0, 0, 1, 1}));
  // an empty range whose byte before is in token 0, and a range that ends in token 0: to the end, as
  // transformers' `if end_token` does with token 0
  const std::vector<TextRange> in_token0 = {{2, 2}, {1, 2}};
  EXPECT_EQ(assistant_mask(spans, in_token0), (std::vector<uint8_t>{1, 1, 1, 1}));
  const std::vector<TextRange> stops = {{9, 10}, {0, 2}};
  EXPECT_EQ(assistant_mask(spans, stops), (std::vector<uint8_t>{0, 0, 0, 0}));
}

constexpr const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}";
constexpr const char* kChatMlGeneration =
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' %}{% generation %}"
    "{{ m['content'] | trim }}<|im_end|>{% endgeneration %}{% else %}{{ m['content'] }}<|im_end|>{% endif %}"
    "{{ '\\n' }}{% endfor %}";
// Llama 3's shape: the role between two added tokens, contents trimmed.
constexpr const char* kHeaders =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] | trim }}<|eot_id|>{% endfor %}";

// The expected tokens of a text made of pieces: text is one token a byte, <|...|> an added token.
struct Expected {
  explicit Expected(const Tokenizer& t) : tok(t) {}
  const Tokenizer& tok;
  std::vector<uint32_t> ids;
  std::vector<uint8_t> labels;
  void add(const std::string& piece, bool target) {
    const std::vector<uint32_t> p = tok.encode(piece);
    ids.insert(ids.end(), p.begin(), p.end());
    labels.insert(labels.end(), p.size(), target ? kTargetLabel : 0);
  }
  void start() { labels[0] = kExampleStartLabel; }
};

struct Sft {
  testing::TempDir dir{"zerodp_sft_messages"};
  std::unique_ptr<Tokenizer> tok = sft_tokenizer(
      {"<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"});
  InstructionFormat format;
  explicit Sft(const char* chat_template) {
    format.end_token = 258;  // <|im_end|>
    format.config_name = "'sft/tokenizer_config.json'";
    format.config = {{"chat_template", chat_template}, {"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|im_end|>"}};
  }
  InstructionTokens run(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    write_file_atomic(dir / "in.jsonl", text);
    return tokenize_instructions(*tok, {dir / "in.jsonl"}, format);
  }
  std::string refused(const std::vector<std::string>& lines) {
    return testing::error_message<UsageError>([&] { run(lines); });
  }
};

const std::string kTwoTurns = R"({"messages": [{"role": "system", "content": "be brief"},
  {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hi there"},
  {"role": "user", "content": "bye"}, {"role": "assistant", "content": " bye "}]})";

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// Without generation blocks, each assistant content and the <|im_end|> after it (" bye " as it is);
// with them, what they hold (here the content trimmed, "bye", and <|im_end|>).
TEST(SftMessages, MarksTheAssistantTurns) {
  for (const auto& [chat_template, second] : {std::pair{kChatMl, " bye "}, std::pair{kChatMlGeneration, "bye"}}) {
    Sft sft(chat_template);
    const InstructionTokens t = sft.run({one_line(kTwoTurns)});
    Expected want(*sft.tok);
    want.add("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false);
    want.add("hi there<|im_end|>", true);
    want.add("\n<|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n", false);
    want.add(std::string(second) + "<|im_end|>", true);
    want.add("\n", false);
    want.start();
    EXPECT_EQ(t.ids, want.ids) << chat_template;
    EXPECT_EQ(t.labels, want.labels) << chat_template;
    EXPECT_EQ(t.examples, 1u);
    EXPECT_EQ(t.conversations, 1u);
  }
}

// The fallback takes neither the role in a header nor an earlier user's words for a content; a
// trimmed content is found trimmed; an empty one marks nothing.
TEST(SftMessages, FallbackFindsTheTurnNotTheHeader) {
  Sft sft(kHeaders);
  const InstructionTokens t =
      sft.run({R"({"messages": [{"role": "user", "content": "assistant"},)"
               R"( {"role": "assistant", "content": "assistant"},)"
               R"( {"role": "user", "content": "x"}, {"role": "assistant", "content": "  "},)"
               R"( {"role": "user", "content": "y"}, {"role": "assistant", "content": " y\n"}]})"});
  Expected want(*sft.tok);
  auto header = [](const char* role) { return std::string("<|start_header_id|>") + role + "<|end_header_id|>\n\n"; };
  want.add("<|begin_of_text|>" + header("user") + "assistant<|eot_id|>" + header("assistant"), false);
  want.add("assistant<|eot_id|>", true);
  want.add(header("user") + "x<|eot_id|>" + header("assistant") + "<|eot_id|>" + header("user") + "y<|eot_id|>" +
               header("assistant"),
           false);
  want.add("y<|eot_id|>", true);
  want.start();
  EXPECT_EQ(t.ids, want.ids);
  EXPECT_EQ(t.labels, want.labels);
}

// Prompt-completion and messages lines in one file; the first token of each example starts it.
TEST(SftMessages, MixesFormats) {
  Sft sft(kChatMl);
  const InstructionTokens t =
      sft.run({R"({"prompt": "q", "completion": "a"})", R"({"messages": [{"role": "assistant", "content": "hi"}]})"});
  Expected want(*sft.tok);
  want.add("<|begin_of_text|>q", false);  // (the tokenizer's end-of-text before a prompt; none before a conversation)
  want.add("a<|im_end|>", true);
  want.add("<|im_start|>assistant\n", false);
  want.add("hi<|im_end|>", true);
  want.add("\n", false);
  want.labels[0] = kExampleStartLabel;
  want.labels[4] = kExampleStartLabel;
  EXPECT_EQ(t.examples, 2u);
  EXPECT_EQ(t.conversations, 1u);
  EXPECT_EQ(t.targets, 2u + 2u);
  EXPECT_EQ(t.ids, want.ids);
  EXPECT_EQ(t.labels, want.labels);
}

TEST(SftMessages, RefusesNamingFileAndLine) {
  Sft sft(kChatMl);
  auto expect = [&](const std::string& line, const std::vector<std::string>& words) {
    const std::string e = sft.refused({R"({"prompt": "q", "completion": "a"})", line});
    EXPECT_NE(e.find("in.jsonl' line 2"), std::string::npos) << line << ": " << e;
    for (const std::string& w : words) EXPECT_NE(e.find(w), std::string::npos) << line << ": " << e;
  };
  expect(R"({"messages": []})", {"non-empty array"});
  expect(R"({"messages": {"role": "user"}})", {"non-empty array"});
  expect(R"({"messages": [3]})", {"message 0", "object"});
  expect(R"({"messages": [{"role": 1, "content": "x"}]})", {"message 0", "\"role\" must be a string"});
  expect(R"({"messages": [{"role": "user"}]})", {"message 0", "no \"content\""});
  expect(R"({"messages": [{"role": "user", "content": 7}]})", {"message 0", "\"content\" must be a string"});
  expect(R"({"messages": [{"role": "user", "content": "x"}], "prompt": "p"})", {"one format a line"});
  expect(R"({"messages": [{"role": "user", "content": "x"}], "tools": []})", {"\"tools\" is not supported"});
  // the fallback needs the assistant's content as a string, found before an end-of-turn
  expect(R"({"messages": [{"role": "assistant", "content": null}]})", {"message 0 (assistant)", "string"});
  const std::string secret(300, 's');
  const std::string e =
      sft.refused({R"({"prompt": "q", "completion": "a"})", R"({"messages": [{"role": "user", "content": "x"}]})",
                   R"({"messages": [{"role": "assistant", "content": ")" + secret + R"("}]})"});
  EXPECT_EQ(e, "");  // (found: the template writes it before <|im_end|>)
  // a template error names the line and the template
  Sft raising("{{ raise_exception('roles must alternate') }}");
  const std::string r = raising.refused({R"({"messages": [{"role": "user", "content": "x"}]})"});
  EXPECT_NE(r.find("in.jsonl' line 1"), std::string::npos) << r;
  EXPECT_NE(r.find("roles must alternate"), std::string::npos) << r;
  EXPECT_NE(r.find("tokenizer_config.json"), std::string::npos) << r;
}

TEST(SftMessages, RefusesWhatTheFallbackCannotFind) {
  Sft sft("{% for m in messages %}{{ m['role'] }}: {{ m['content'] | upper }}<|im_end|>{% endfor %}");
  const std::string long_content(500, 'z');
  const std::string e = sft.refused({R"({"messages": [{"role": "assistant", "content": ")" + long_content + R"("}]})"});
  EXPECT_NE(e.find("line 1: message 0 (assistant)"), std::string::npos) << e;
  EXPECT_NE(e.find("generation"), std::string::npos) << e;
  EXPECT_EQ(e.find(long_content), std::string::npos) << "echoes the whole content";
}

TEST(SftMessages, NeedsAChatTemplate) {
  Sft sft(kChatMl);
  sft.format.config = {{"eos_token", "<|im_end|>"}};
  std::string e = sft.refused({R"({"messages": [{"role": "user", "content": "x"}]})"});
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  EXPECT_NE(e.find("'sft/tokenizer_config.json' has no chat_template"), std::string::npos) << e;
  sft.format.config_name.clear();
  sft.format.config = nullptr;
  e = sft.refused({R"({"messages": [{"role": "user", "content": "x"}]})"});
  EXPECT_NE(e.find("there is none"), std::string::npos) << e;
  // prompt-completion lines need no template
  EXPECT_EQ(sft.run({R"({"prompt": "q", "completion": "a"})"}).examples, 1u);
}

// instruction_format reads eos_token and the template from the tokenizer_config.json beside the file.
TEST(SftMessages, ReadsTheConfigBesideTheTokenizer) {
  Sft sft(kChatMl);
  write_file_atomic(sft.dir / "tokenizer_config.json",
                    json{{"chat_template", kChatMl}, {"eos_token", {{"content", "<|eot_id|>"}}}}.dump());
  const InstructionFormat f = instruction_format(*sft.tok, sft.dir / "tokenizer.json");
  EXPECT_EQ(f.end_token, 262u);
  EXPECT_NE(f.config_name.find("tokenizer_config.json"), std::string::npos);
  EXPECT_EQ(f.config["chat_template"], kChatMl);
  const InstructionFormat none = instruction_format(*sft.tok, sft.dir / "elsewhere/tokenizer.json");
  EXPECT_TRUE(none.config_name.empty());
  EXPECT_EQ(none.end_token, sft.tok->eos_id());
}

}  // namespace
}  // namespace zerodp::data
