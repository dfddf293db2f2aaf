// Which tokens each rank reads (docs/reference/data-order.md). World size W, rank r, micro-batch B
// sequences of T tokens, G accumulation micro-steps per optimizer step. Sequence b of rank r's
// micro-batch at step s, micro-step g has the global index
//     q = ((s·G + g)·W + r)·B + b
// so a step's W·G·B sequences are the same however they are split over ranks and micro-steps.
//
// In order (--shuffle off, the default): the micro-batch reads the B·T+1 tokens starting
// at off = ((s·G + g)·W + r)·B·T (positions modulo the number of tokens); inputs are the first B·T
// of them, targets the last B·T, both [B, T]: sequence q starts at token q·T.
//
// Positions index the data's whole stream (data/dataset.h: one file, or shards read end to end), N
// its number of tokens.
//
// Shuffled (--shuffle on --seed S): the stream is cut into K = ⌊(N − 1)/T⌋ windows of T+1 tokens
// (window w is tokens [w·T, w·T + T], inputs its first T, targets its last T), and every epoch
// reads each window once, in an order drawn from the seed: sequence q reads window π_e(q mod K) of
// epoch e = ⌊q / K⌋, where π_e is a pseudo-random permutation of [0, K) keyed by (S, e). Being a
// function of q alone, the order is the same at every world size, stage and split, and a resumed
// run continues it exactly; nothing but the seed needs to be stored. Windows may straddle shards.
//
// Validation (EvalWindows below, docs/reference/data-order.md#validation) reads the first K windows
// of T tokens of its stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace zerodp::data {

// A keyed pseudo-random permutation of [0, n): a 4-round Feistel network on the smallest power of
// four ≥ n, with cycle-walking back into [0, n) (fewer than four rounds of it on average), so that
// any position maps in O(1) time and no permutation table is ever built.
class WindowPermutation {
 public:
  WindowPermutation(uint64_t n, uint64_t seed, uint64_t epoch);
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  uint64_t feistel(uint64_t x) const;
  uint64_t n_;
  int half_bits_;  // each Feistel half holds this many bits
  uint64_t keys_[4];
};

struct ShuffleSpec {
  bool enabled = false;
  uint64_t seed = 0;
};

// The global index of the first sequence of (step, micro_step) on `rank`: ((s·G + g)·W + r)·B, checked
// not to pass 2^64.
uint64_t first_sequence_of(uint64_t step, int micro_step, int world_size, int rank, int micro_batch, int accum);

// What the trainer reads each micro-step from: a token stream (BatchLoader) or instruction data
// (data/instruction_data.h).
class TrainBatches {
 public:
  virtual ~TrainBatches() = default;
  // Fills inputs[B·T] and targets[B·T] (row-major [B, T]) of this rank's micro-batch.
  virtual void load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const = 0;
  // The positions of the step's global batch (every rank's, every micro-step's) that have a target
  // (not kIgnoreTarget): what the loss is averaged over. 0 when every position has one.
  virtual uint64_t targets(uint64_t /*step*/) const { return 0; }
  // Whether rows hold several examples each (packed sequences), whose positions positions() gives.
  virtual bool packed() const { return false; }
  // Packed: fills positions[B·T] of the micro-batch load() fills, each token's position in its example
  // (model/model.h).
  virtual void positions(uint64_t /*step*/, int /*micro_step*/, int32_t* /*positions*/) const {}
  // "'tok.bin' (text)" for the log.
  virtual std::string describe() const = 0;
};

class BatchLoader final : public TrainBatches {
 public:
  // UsageError naming the parameter when a size is not positive, the rank is outside [0, W), or
  // (shuffled) the stream holds no window of T+1 tokens. `tokens` must outlive the loader.
  BatchLoader(const TokenStream& tokens, int world_size, int rank, int micro_batch, int seq_len, int accum = 1,
              ShuffleSpec shuffle = {});

  // The first token position of (step, micro_step) for this rank in order (--shuffle off), already
  // reduced modulo the number of tokens.
  size_t offset(uint64_t step, int micro_step) const;
  // The first token of the sequence with global index q (either order).
  size_t sequence_start(uint64_t q) const;
  // Fills inputs[B·T] and targets[B·T] (row-major [B, T]).
  void load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const override;
  std::string describe() const override;

  size_t tokens_per_micro_batch() const { return static_cast<size_t>(B_) * static_cast<size_t>(T_); }
  // Windows of an epoch when shuffled (0 in order).
  uint64_t windows() const { return windows_; }
  int world_size() const { return W_; }
  int rank() const { return r_; }
  int micro_batch() const { return B_; }
  int seq_len() const { return T_; }
  int accum() const { return G_; }

 private:
  uint64_t first_sequence(uint64_t step, int micro_step) const;

  const TokenStream* tokens_;
  int W_, r_, B_, T_, G_;
  ShuffleSpec shuffle_;
  uint64_t windows_ = 0;
};

// Validation windows (docs/reference/data-order.md#validation): the first K windows of T tokens of
// a stream, window q being its tokens q·T .. q·T+T−1 as inputs and the T tokens one further as
// targets (so the stream must hold K·T + 1 tokens), split over W ranks for forward passes of B
// windows each: rank r takes the windows r, r+W, r+2W, ... in that order, B a pass. Every rank runs
// the same number of passes, ⌈⌈K/W⌉/B⌉ (stage 3 gathers parameters collectively); a slot past the
// rank's last window is padding: it holds window 0 again and its loss is not counted. So every
// window is counted exactly once, whatever W and B.
class EvalWindows {
 public:
  // UsageError when K < 1, a size is not positive or the rank is outside [0, W).
  EvalWindows(uint64_t windows, int world_size, int rank, int micro_batch, int seq_len);

  uint64_t windows() const { return K_; }
  uint64_t passes() const { return passes_; }
  // The window in slot b of pass p on this rank, or -1 for a padding slot.
  int64_t window(uint64_t pass, int b) const;
  // Fills inputs[B·T] and targets[B·T] (row-major [B, T]) of pass p from `tokens` (which must hold
  // K·T + 1 tokens); padding slots read window 0.
  void load(const TokenStream& tokens, uint64_t pass, int32_t* inputs, int32_t* targets) const;

 private:
  uint64_t K_;
  int W_, r_, B_, T_;
  uint64_t passes_;
};

}  // namespace zerodp::data
