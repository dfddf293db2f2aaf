// Instruction data (docs/reference/files.md#instruction-data): examples of prompt and response tokens
// in a token file, and beside it a labels file that says which tokens are targets and where each
// example starts. `zerodp tokenize --instructions` writes the pair; `zerodp train --data` given the
// token file reads them together (data/loader.h's TrainBatches).
//
// The labels file `P.labels` beside `P.bin`: a 1024-byte header of 256 little-endian int32 ([0] =
// 20261129, [1] = 1, [2] and [3] = the number of tokens, low and high 32 bits), then one byte a
// token: bit 0 (kTargetLabel) when the token is a target, predicted from the tokens before it in its
// example; bit 1 (kExampleStartLabel) on the first token of each example (the file's first token
// starts one). Other bits are 0.
//
// Batches, padded or packed (docs/reference/data-order.md#instruction-data). Each example counts with
// its first T + 1 tokens (longer ones are truncated). Sequences are filled from packs of examples:
//   padded: a pack per example, its tokens [0, min(n, T)) the inputs, padding after them;
//   packed: consecutive examples, in file order, while their inputs fit in T: each example's first
//     n − 1 tokens are inputs at positions 0, 1, ... (its last is only predicted), then padding, a
//     segment of its own at positions 0, 1, ...;
// targets are the next token where that one is a target, kIgnoreTarget elsewhere, padding included.
// Sequence q of the global order (data/loader.h) holds pack q mod P (P packs) in order; shuffled,
// epoch ⌊q / P⌋ reads the packs in the permutation keyed by the seed (WindowPermutation), as windows
// are read for plain text. Which examples share a pack depends on the data and T alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fs.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tokens.h"

namespace zerodp::data {

constexpr int32_t kLabelsMagic = 20261129;
constexpr int32_t kLabelsVersion = 1;
constexpr uint8_t kTargetLabel = 1;
constexpr uint8_t kExampleStartLabel = 2;

// "dir/P.labels" for "dir/P.bin" (another extension: the name with ".labels" appended).
std::string labels_path_for(const std::string& tokens_path);
// Writes the labels of n tokens to `path` atomically.
void write_labels_file(const std::string& path, std::span<const uint8_t> labels);

class InstructionData {
 public:
  // Whether `spec` is one token file with a labels file beside it.
  static bool present(const std::string& spec);
  // Maps the token file and its labels: UsageError naming the file when the labels' header is not
  // one, their count differs from the tokens', a byte has other bits, or the first token starts no
  // example.
  static InstructionData open(const std::string& tokens_path, int vocab_size);

  size_t examples() const { return starts_.size() - 1; }
  size_t tokens() const { return tokens_.size(); }
  // Example e's tokens are [start(e), start(e + 1)).
  uint64_t start(size_t e) const { return starts_[e]; }
  size_t length(size_t e) const { return static_cast<size_t>(starts_[e + 1] - starts_[e]); }
  const TokenFile& token_file() const { return tokens_; }
  bool is_target(uint64_t pos) const { return (labels_.data()[kLabelsHeaderBytes + pos] & kTargetLabel) != 0; }
  // Targets in all the examples.
  uint64_t total_targets() const { return total_targets_; }
  // Targets of example e within its first T + 1 tokens (what a sequence of T holds of it).
  uint32_t targets_within(size_t e, int T) const;
  // One row of T from examples [first, end) back to back (see the top of this file): packed, each
  // one's first n − 1 tokens at positions 0, 1, ...; else (one example) its first min(n, T); then
  // padding. Any of inputs, targets and positions may be null.
  void fill_row(size_t first, size_t end, int T, bool packed, int32_t* inputs, int32_t* targets,
                int32_t* positions) const;

  static constexpr size_t kLabelsHeaderBytes = 1024;

 private:
  TokenFile tokens_;
  MappedFile labels_;
  std::vector<uint64_t> starts_;  // E + 1 entries, the last the number of tokens
  uint64_t total_targets_ = 0;
};

// The training batches of instruction data, padded or packed (see the top of this file).
class InstructionBatches final : public TrainBatches {
 public:
  InstructionBatches(const InstructionData& data, int world_size, int rank, int micro_batch, int seq_len, int accum,
                     ShuffleSpec shuffle, bool packed = false);
  void load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const override;
  uint64_t targets(uint64_t step) const override;
  bool packed() const override { return packed_; }
  void positions(uint64_t step, int micro_step, int32_t* positions) const override;
  std::string describe() const override;
  // The pack sequence q holds, and its examples [first_example(p), first_example(p + 1)).
  size_t pack_of(uint64_t q) const;
  size_t first_example(size_t pack) const { return pack_starts_[pack]; }
  size_t packs() const { return pack_starts_.size() - 1; }

 private:
  void fill_pack(size_t pack, int32_t* inputs, int32_t* targets, int32_t* positions) const;

  const InstructionData* data_;
  int W_, r_, B_, T_, G_;
  ShuffleSpec shuffle_;
  bool packed_;
  std::vector<uint64_t> pack_starts_;  // the first example of each pack, then E
  std::vector<uint32_t> targets_of_;   // per pack, within its examples' first T + 1 tokens
  size_t truncated_ = 0;               // examples longer than T + 1 tokens
};

// The training data `spec` names (--data): instruction data when it is one token file with a labels
// file beside it, else a token stream (data/dataset.h). Owns what its batches read.
struct TrainData {
  std::unique_ptr<TokenStream> stream;
  std::unique_ptr<InstructionData> instructions;
  std::unique_ptr<TrainBatches> batches;
};
// `packed`: instruction data in packed sequences (--packing); a UsageError for a token stream.
TrainData open_train_data(const std::string& spec, int vocab_size, int world_size, int rank, int micro_batch,
                          int seq_len, int accum, ShuffleSpec shuffle, bool packed = false);

}  // namespace zerodp::data
