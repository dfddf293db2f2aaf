// libFuzzer target: zerodp::data::BpeTokenizer::from_json, the reader of Hugging Face tokenizer.json
// files (bounded and validated: every bad file a zerodp::Error). A file that loads then encodes a
// fixed multilingual text and the input's own bytes (regexes, added tokens and merges from the file
// meet text of any kind); every id must be below the vocabulary and decode without error. (Whether the
// text comes back whole depends on the file: Removed splits, stripped added tokens and a prefix space
// change it, in tokenizers too; tests/tokenizer checks the round trip where it holds.)
// Seeds (corpus/tokenizer/, not written by make_corpus.py): GPT-2- and Llama-3-shaped files trained by
// zdptest.train_tokenizers (tests/pylib) with 272 tokens, hand-made ones for Sequence/Digits/Split(String,
// MergedWithNext), an inverted Removed split with an empty lookahead match, merges as pairs, a prefix
// space, an unk_token and added tokens with every flag, and one with a bad merge.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe.h"
#include "fuzz/fuzz_common.h"

namespace {

const char kText[] =
    "Hello world! It's 1234567 o'clock.\r\n\tTabs   and  spaces \n\n"
    "中文测试 日本語 مرحبا नमस्ते Привет 👨‍👩‍👧‍👦 e\xcc\x81 <|endoftext|> \xff\xfe end";

void check(const zerodp::data::BpeTokenizer& t, std::string_view text) {
  std::vector<uint32_t> ids;
  t.encode(text, ids);
  for (uint32_t id : ids)
    if (id >= t.vocab_size()) zerodp::fuzz::property_failed("tokenizer", "an id is not below the vocabulary size");
  const std::string back = t.decode(ids);
  (void)back;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  zerodp::fuzz::only_zerodp_errors("tokenizer", [&] {
    const auto t = zerodp::data::BpeTokenizer::from_json(input, "tokenizer 'fuzz'");
    check(*t, std::string_view(kText, sizeof kText - 1));
    check(*t, input);
  });
  return 0;
}
