// Instruction data (docs/reference/files.md#instruction-data, data-order.md#instruction-data): the
// labels file written and read back, refusals naming the file, padded batches with their targets,
// the global target count equal whatever the split, and tokenize --sft's labels.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/targets.h"
#include "data/instruction_data.h"
#include "data/instruction_tokenize.h"
#include "data/token_writer.h"
#include "data/tokenizer.h"
#include "temp_dir.h"

namespace zerodp::data {
namespace {

constexpr uint8_t S = kExampleStartLabel, Y = kTargetLabel;

// Three examples: [10 11 | 12 13] (2 targets), [20 | 21 22 23 24 25] (5), [30 31 32 | 33] (1).
struct Files {
  testing::TempDir dir{"zerodp_sft"};
  std::string tokens = dir / "sft.bin";
  std::vector<uint32_t> ids = {10, 11, 12, 13, 20, 21, 22, 23, 24, 25, 30, 31, 32, 33};
  std::vector<uint8_t> labels = {S, 0, Y, Y, S, Y, Y, Y, Y, Y, S, 0, 0, Y};
  Files() {
    write_tokens(tokens, ids, 64);
    write_labels_file(labels_path_for(tokens), labels);
  }
};

TEST(InstructionData, ReadsExamplesAndTargets) {
  const Files f;
  EXPECT_EQ(labels_path_for(f.tokens), f.dir / "sft.labels");
  EXPECT_EQ(labels_path_for("x.tok"), "x.tok.labels");
  ASSERT_TRUE(InstructionData::present(f.tokens));
  EXPECT_FALSE(InstructionData::present(f.dir / "none.bin"));
  const InstructionData d = InstructionData::open(f.tokens, 64);
  ASSERT_EQ(d.examples(), 3u);
  EXPECT_EQ(d.length(0), 4u);
  EXPECT_EQ(d.start(1), 4u);
  EXPECT_EQ(d.length(1), 6u);
  EXPECT_EQ(d.total_targets(), 8u);
}

// T = 4: example 1 (6 tokens) is truncated to its first 5; example 0 is padded.
TEST(InstructionData, PadsTruncatesAndMasks) {
  const Files f;
  const InstructionData d = InstructionData::open(f.tokens, 64);
  const InstructionBatches b(d, 1, 0, 3, 4, 1, {});
  std::vector<int32_t> in(12), tg(12);
  b.load(0, 0, in.data(), tg.data());
  const int32_t I = kIgnoreTarget;
  EXPECT_EQ(in, (std::vector<int32_t>{10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33}));
  EXPECT_EQ(tg, (std::vector<int32_t>{I, 12, 13, I, 21, 22, 23, 24, I, I, 33, I}));
  EXPECT_EQ(b.targets(0), 2u + 4u + 1u);
  b.load(1, 0, in.data(), tg.data());  // sequences 3, 4, 5: the examples again
  EXPECT_EQ(in[0], 10);
}

// The global batch's targets are the same however it is split over ranks and micro-steps.
TEST(InstructionData, TargetsOfAStepDoNotDependOnTheSplit) {
  const Files f;
  const InstructionData d = InstructionData::open(f.tokens, 64);
  for (uint64_t step = 0; step < 5; ++step) {
    const uint64_t one = InstructionBatches(d, 1, 0, 4, 5, 1, {}).targets(step);
    EXPECT_EQ(InstructionBatches(d, 2, 1, 2, 5, 1, {}).targets(step), one) << step;
    EXPECT_EQ(InstructionBatches(d, 2, 0, 1, 5, 2, {}).targets(step), one) << step;
    EXPECT_EQ(InstructionBatches(d, 4, 3, 1, 5, 1, {true, 7}).targets(step),
              InstructionBatches(d, 1, 0, 4, 5, 1, {true, 7}).targets(step))
        << step;
  }
}

TEST(InstructionData, RefusesLabelsThatDoNotFit) {
  const Files f;
  auto expect_refused = [&](std::vector<uint8_t> labels, const std::string& words) {
    write_labels_file(labels_path_for(f.tokens), labels);
    try {
      InstructionData::open(f.tokens, 64);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("sft.labels"), std::string::npos) << m;
      EXPECT_NE(m.find(words), std::string::npos) << m;
    }
  };
  std::vector<uint8_t> l = f.labels;
  l.pop_back();
  expect_refused(l, "labels 13 tokens");
  l = f.labels;
  l[0] = 0;
  expect_refused(l, "first token starts no example");
  l = f.labels;
  l[3] = 4;
  expect_refused(l, "unknown bits");
  l = f.labels;
  l[4] = S | Y;
  expect_refused(l, "starts an example and is a target");
  write_file_atomic(labels_path_for(f.tokens), std::string(2000, 'x'));
  try {
    InstructionData::open(f.tokens, 64);
    ADD_FAILURE() << "accepted a file without the header";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("not a zerodp labels file"), std::string::npos) << e.what();
  }
}

// Prompt and completion with the byte tokenizer: the targets are the completion's bytes and the end
// token; the example's first token starts it.
TEST(InstructionData, TokenizesPromptAndCompletion) {
  const testing::TempDir dir("zerodp_sft_tok");
  write_file_atomic(dir / "a.jsonl", std::string("{\"prompt\": \"ab\", \"completion\": \"c\"}\n\n"
                                                 "{\"prompt\": \"\", \"completion\": \"de\"}\n"));
  const auto bytes = byte_tokenizer();
  InstructionFormat format;
  format.end_token = 255;
  const InstructionTokens t = tokenize_instructions(*bytes, {dir / "a.jsonl"}, format);
  EXPECT_EQ(t.examples, 2u);
  EXPECT_EQ(t.ids, (std::vector<uint32_t>{'a', 'b', 'c', 255, 'd', 'e', 255}));
  EXPECT_EQ(t.labels, (std::vector<uint8_t>{S, 0, Y, Y, S, Y, Y}));
  EXPECT_EQ(t.targets, 4u);
  write_file_atomic(dir / "b.jsonl", std::string("{\"prompt\": \"ab\"}\n"));
  EXPECT_THROW(tokenize_instructions(*bytes, {dir / "b.jsonl"}, format), UsageError);
  write_file_atomic(dir / "c.jsonl", std::string("{\"messages\": []}\n"));
  try {
    tokenize_instructions(*bytes, {dir / "c.jsonl"}, format);
    ADD_FAILURE() << "accepted messages without a chat template";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("line 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chat template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zerodp::data
