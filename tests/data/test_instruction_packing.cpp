// Packed instruction batches (data/instruction_data.h, docs/reference/data-order.md#instruction-data):
// consecutive examples share a sequence while their inputs fit, each at positions from 0, padding a
// segment of its own; the packs are the sequences of the global order, shuffled as windows are; a
// step's targets do not depend on the split; a token stream cannot be packed.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/targets.h"
#include "data/instruction_data.h"
#include "data/token_writer.h"
#include "temp_dir.h"

namespace zerodp::data {
namespace packing_test {

constexpr uint8_t S = kExampleStartLabel, Y = kTargetLabel;
constexpr int32_t I = kIgnoreTarget;

// Four examples: [10 11 | 12] (1 target), [20 | 21 22] (2), [30 31 32 33 34 35 | 36] (1, 6 inputs),
// [40 | 41] (1).
struct PackFiles {
  testing::TempDir dir{"zerodp_pack"};
  std::string tokens = dir / "sft.bin";
  PackFiles() {
    const std::vector<uint32_t> ids = {10, 11, 12, 20, 21, 22, 30, 31, 32, 33, 34, 35, 36, 40, 41};
    const std::vector<uint8_t> labels = {S, 0, Y, S, Y, Y, S, 0, 0, 0, 0, 0, Y, S, Y};
    write_tokens(tokens, ids, 64);
    write_labels_file(labels_path_for(tokens), labels);
  }
};

// T = 6: examples 0 and 1 (2 + 2 inputs) share pack 0; example 2 (6 inputs) fills pack 1 alone;
// example 3 (1 input) is pack 2.
TEST(InstructionPacking, PacksConsecutiveExamplesWhileTheyFit) {
  const PackFiles f;
  const InstructionData d = InstructionData::open(f.tokens, 64);
  const InstructionBatches b(d, 1, 0, 3, 6, 1, {}, true);
  ASSERT_TRUE(b.packed());
  ASSERT_EQ(b.packs(), 3u);
  EXPECT_EQ(b.first_example(1), 2u);
  EXPECT_EQ(b.first_example(2), 3u);
  std::vector<int32_t> in(18), tg(18), pos(18);
  b.load(0, 0, in.data(), tg.data());
  b.positions(0, 0, pos.data());
  EXPECT_EQ(in, (std::vector<int32_t>{10, 11, 20, 21, 0, 0, 30, 31, 32, 33, 34, 35, 40, 0, 0, 0, 0, 0}));
  EXPECT_EQ(tg, (std::vector<int32_t>{I, 12, 21, 22, I, I, I, I, I, I, I, 36, 41, I, I, I, I, I}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.targets(0), 5u);
  // Sequence 3 is pack 0 again (in order, the packs repeat as windows do).
  b.load(1, 0, in.data(), tg.data());
  EXPECT_EQ(in[0], 10);
  EXPECT_EQ(in[2], 20);
  // Padded, the same data takes a sequence per example.
  EXPECT_EQ(InstructionBatches(d, 1, 0, 3, 6, 1, {}).packs(), 4u);
}

// Shuffled, each epoch reads every pack once, in an order drawn from the seed.
TEST(InstructionPacking, ShuffledEpochsReadEveryPackOnce) {
  const PackFiles f;
  const InstructionData d = InstructionData::open(f.tokens, 64);
  const InstructionBatches b(d, 1, 0, 1, 6, 1, {true, 11}, true);
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<bool> seen(b.packs());
    for (uint64_t q = epoch * b.packs(); q < (epoch + 1) * b.packs(); ++q) seen[b.pack_of(q)] = true;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 3) << "epoch " << epoch;
  }
}

TEST(InstructionPacking, TargetsOfAStepDoNotDependOnTheSplit) {
  const PackFiles f;
  const InstructionData d = InstructionData::open(f.tokens, 64);
  for (uint64_t step = 0; step < 6; ++step) {
    const uint64_t one = InstructionBatches(d, 1, 0, 4, 6, 1, {}, true).targets(step);
    EXPECT_EQ(InstructionBatches(d, 2, 1, 2, 6, 1, {}, true).targets(step), one) << step;
    EXPECT_EQ(InstructionBatches(d, 4, 0, 1, 6, 1, {}, true).targets(step), one) << step;
    EXPECT_EQ(InstructionBatches(d, 2, 0, 1, 6, 2, {true, 3}, true).targets(step),
              InstructionBatches(d, 1, 0, 2, 6, 2, {true, 3}, true).targets(step))
        << step;
  }
}

TEST(InstructionPacking, TokenStreamIsNotPacked) {
  testing::TempDir dir{"zerodp_pack_stream"};
  const std::string tokens = dir / "text.bin";
  write_tokens(tokens, std::vector<uint32_t>(64, 3), 64);
  try {
    open_train_data(tokens, 64, 1, 0, 1, 8, 1, {}, true);
    FAIL() << "a token stream was packed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--packing"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("labels"), std::string::npos) << e.what();
  }
}

}  // namespace packing_test
}  // namespace zerodp::data
