// Which tokens each rank reads (contract §5). World size W, rank r, micro-batch B sequences of T
// tokens, G accumulation micro-steps per optimizer step. At step s, micro-step g, rank r reads the
// B·T+1 tokens starting at
//     off = ((s·G + g)·W + r)·B·T          (positions modulo the number of tokens)
// inputs are the first B·T of them, targets the last B·T, both [B, T] int32. The global batch of a
// step is thus the same W·G·B·T sequences however it is split over ranks and micro-steps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "data/tokens.h"

namespace zerodp::data {

class BatchLoader {
 public:
  // UsageError naming the parameter when a size is not positive or the rank is outside [0, W).
  // `tokens` must outlive the loader.
  BatchLoader(const TokenFile& tokens, int world_size, int rank, int micro_batch, int seq_len, int accum = 1);

  // The first token position of (step, micro_step) for this rank, already reduced modulo the
  // number of tokens.
  size_t offset(uint64_t step, int micro_step) const;
  // Fills inputs[B·T] and targets[B·T] (row-major [B, T]).
  void load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const;

  size_t tokens_per_micro_batch() const { return static_cast<size_t>(B_) * static_cast<size_t>(T_); }
  int world_size() const { return W_; }
  int rank() const { return r_; }
  int micro_batch() const { return B_; }
  int seq_len() const { return T_; }
  int accum() const { return G_; }

 private:
  const TokenFile* tokens_;
  int W_, r_, B_, T_, G_;
};

}  // namespace zerodp::data
