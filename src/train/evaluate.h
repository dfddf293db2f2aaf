// Evaluation (docs/reference/data-order.md#validation): the validation loss during training and `zerodp eval`.
//
// The validation loss is the mean token cross-entropy over the first K windows of T tokens of the
// validation stream (window q: inputs at q·T .. q·T+T−1, targets one further), whatever W, B, G,
// stage and dtype's split of the work: the windows are split over the ranks by data::EvalWindows
// (rank r takes windows r, r+W, ..., B a forward pass, every rank the same number of passes, padding
// not counted), each sequence's loss summed in double, each rank's sum of its windows taken in window
// order, and the W sums all-gathered (as bytes) and added in rank order. So it agrees across world
// sizes and micro-batches to double rounding of the sums plus whatever the forward's own per-token
// rounding does with the batch's shape (measured 1e-7 relative in fp32).
//
// `zerodp eval --model M --data PATH --tokens E --seq T` computes the same number for a model file
// on one process in fp32; `zerodp eval --model M --choices FILE.jsonl` scores multiple-choice items.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "data/dataset.h"
#include "data/instruction_data.h"
#include "data/loader.h"
#include "zero/engine.h"

namespace zerodp::train {

// --eval-tokens' default (0): the first 2^20 tokens of the validation stream, or as many whole
// windows as the stream holds when it holds fewer.
constexpr int64_t kDefaultEvalTokens = int64_t{1} << 20;

// K, the windows of T tokens to evaluate from `val`: ⌊E/T⌋ for E = eval_tokens > 0, a UsageError
// (naming `flag`, E, T and the stream) when E < T or when the stream holds fewer than K·T + 1
// tokens (it says how many it holds and the most E it allows); for eval_tokens = 0,
// ⌊min(kDefaultEvalTokens, N − 1)/T⌋ (a UsageError when not even one window fits).
uint64_t validation_windows(const data::TokenStream& val, int64_t eval_tokens, int64_t seq, const std::string& flag);

// Inference in one process holds every weight in fp32 and the activations of B sequences of T tokens.
// A model can be valid and still need more than this machine has: UsageError (before any of it is
// allocated) naming the model `path`, what is being done (`job`) and the flag that makes it smaller
// (`remedy`). The attention's probabilities are bounded first, so nothing after them overflows.
void check_inference_memory(const model::ModelConfig& mc, int64_t B, int64_t T, const std::string& path,
                            std::string_view job, std::string_view remedy);

// The sum of the losses of the windows this rank counts: sums[p·B + b] is slot b of pass p
// (zero::Engine::evaluate's order), padding slots left out, in window order.
double counted_loss_sum(const data::EvalWindows& split, const std::vector<double>& sums);

// The validation loss of the engine's current weights (collective over `world` and the engine's
// communicator): K windows of the engine's T tokens from `val`, B (the engine's micro-batch) a pass.
// The same value on every rank. Changes nothing in the engine's training state.
double validation_loss(zero::Engine& engine, comm::Communicator& world, const data::TokenStream& val,
                       uint64_t windows);

// Held-out instruction data (docs/reference/data-order.md#validation): the mean token cross-entropy
// over the targets of its first K examples, each padded in a sequence of its own as training pads it
// (truncated to T + 1 tokens), the sequences split over the ranks as windows are. K = ⌊E/T⌋ for
// eval_tokens E > 0 (at most every example), else every example; a UsageError naming `flag` when K is
// 0 or those examples hold no target.
uint64_t validation_examples(const data::InstructionData& val, int64_t eval_tokens, int64_t seq,
                             const std::string& flag);
// Their targets: what the loss is averaged over.
uint64_t validation_targets(const data::InstructionData& val, uint64_t examples, int seq);
double validation_loss(zero::Engine& engine, comm::Communicator& world, const data::InstructionData& val,
                       uint64_t examples);

// A run's validation set (--val-data): windows of a token stream, or held-out instruction data when a
// labels file is beside the one token file. Opened (and its size checked) before training allocates.
class ValidationSet {
 public:
  ValidationSet(const std::string& spec, int vocab_size, int64_t eval_tokens, int64_t seq, const std::string& flag);
  // The mean loss of the engine's current weights (collective; the same value on every rank).
  double loss(zero::Engine& engine, comm::Communicator& world) const;
  // What the loss averages over: K·T tokens of windows, or the examples' targets.
  uint64_t tokens() const { return tokens_; }
  // "K windows of T tokens (N tokens) of SPEC" or "K examples (N targets) of SPEC".
  std::string describe() const;

 private:
  std::unique_ptr<data::TokenStream> stream_;
  std::unique_ptr<data::InstructionData> examples_;
  uint64_t count_ = 0;  // K windows or examples
  int64_t seq_ = 0;
  uint64_t tokens_ = 0;
};

// `zerodp eval --model M --data PATH --tokens E --seq T --micro-batch B`: one process, fp32.
struct EvalResult {
  double val_loss = 0;
  uint64_t tokens = 0;   // K·T
  uint64_t windows = 0;  // K
};
EvalResult evaluate_model_file(const std::string& model_path, const std::string& data, int64_t eval_tokens,
                               int64_t seq, int64_t micro_batch);

// `zerodp eval --model M --choices FILE.jsonl [--tokenizer tokenizer.json]`: multiple-choice items
// scored as llm.c scores HellaSwag. Each line is {"context": "...", "endings": ["...", ...],
// "label": i}; an ending's tokens are ids(context) followed by ids(ending), each text encoded on its
// own as the file gives it (so a leading space belongs in the ending's text, as HellaSwag's endings
// are usually given " " + ending); its score is the mean token cross-entropy over the ending's tokens
// only, predicted from everything before them; the ending with the lowest mean wins. Bounds: a line
// of at most kMaxChoiceLineBytes, at most kMaxEndings endings, a context of at least one token, and
// context + ending within the model's context n_ctx + 1 (the last token is only a target); anything
// else is a UsageError naming the file and the item (its line).
constexpr size_t kMaxChoiceLineBytes = size_t{1} << 20;
constexpr size_t kMaxEndings = 64;
constexpr size_t kMaxChoiceFileBytes = size_t{1} << 30;
struct ChoiceResult {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};
// tokenizer_path empty: bytes (V = 256).
ChoiceResult score_choices(const std::string& model_path, const std::string& choices_path,
                           const std::string& tokenizer_path);

}  // namespace zerodp::train
