#include "data/loader.h"

#include "core/error.h"

namespace zerodp::data {

BatchLoader::BatchLoader(const TokenFile& tokens, int world_size, int rank, int micro_batch, int seq_len,
                         int accum)
    : tokens_(&tokens), W_(world_size), r_(rank), B_(micro_batch), T_(seq_len), G_(accum) {
  ZDP_REQUIRE(world_size > 0, "world size must be positive, got {}", world_size);
  ZDP_REQUIRE(rank >= 0 && rank < world_size, "rank {} is outside [0, {})", rank, world_size);
  ZDP_REQUIRE(micro_batch > 0, "--micro-batch must be positive, got {}", micro_batch);
  ZDP_REQUIRE(seq_len > 0, "--seq must be positive, got {}", seq_len);
  ZDP_REQUIRE(accum > 0, "--accum must be positive, got {}", accum);
  ZDP_CHECK(tokens.size() > 0, "token file '{}' is empty", tokens.path());
}

size_t BatchLoader::offset(uint64_t step, int micro_step) const {
  ZDP_CHECK(micro_step >= 0 && micro_step < G_, "micro-step {} of {}", micro_step, G_);
  // In 128 bits: ((s·G + g)·W + r)·B·T overflows 64 bits only for absurd steps, but costs nothing to get
  // right.
  using u128 = unsigned __int128;
  const u128 seq_index = (static_cast<u128>(step) * static_cast<u128>(G_) + static_cast<u128>(micro_step)) *
                             static_cast<u128>(W_) +
                         static_cast<u128>(r_);
  const u128 off = seq_index * static_cast<u128>(B_) * static_cast<u128>(T_);
  return static_cast<size_t>(off % static_cast<u128>(tokens_->size()));
}

void BatchLoader::load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const {
  const size_t n = tokens_per_micro_batch();
  const size_t num_tokens = tokens_->size();
  const uint16_t* tok = tokens_->tokens();
  size_t pos = offset(step, micro_step);
  // Token k of the window (k = 0..n) is an input for k < n and a target for k > 0.
  int32_t prev = tok[pos];
  for (size_t k = 0; k < n; ++k) {
    if (++pos == num_tokens) pos = 0;
    const int32_t next = tok[pos];
    inputs[k] = prev;
    targets[k] = next;
    prev = next;
  }
}

}  // namespace zerodp::data
