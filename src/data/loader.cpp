#include "data/loader.h"

#include "core/error.h"
#include "core/rng.h"
#include "data/hash.h"

namespace zerodp::data {

namespace {

using u128 = unsigned __int128;

}  // namespace

// ---- WindowPermutation ---------------------------------------------------------------------------

WindowPermutation::WindowPermutation(uint64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  ZDP_CHECK(n >= 1, "a permutation of {} elements", n);
  half_bits_ = 1;
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  // Round keys from Philox on (seed; stream "shuffle", epoch): independent across epochs.
  const uint64_t stream = fnv1a64("zerodp data shuffle");
  const PhiloxCounter a = philox4x32({static_cast<uint32_t>(epoch), static_cast<uint32_t>(epoch >> 32),
                                      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                                     {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  for (int k = 0; k < 4; ++k) keys_[k] = mix64((uint64_t{a[k]} << 32) ^ (0x9e3779b97f4a7c15ull * (k + 1)));
}

uint64_t WindowPermutation::feistel(uint64_t x) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (uint64_t key : keys_) {
    const uint64_t next = left ^ (mix64(right ^ key) & mask);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t WindowPermutation::operator()(uint64_t i) const {
  ZDP_CHECK(i < n_, "position {} of a permutation of {}", i, n_);
  // The Feistel network permutes [0, 4^half_bits); walking the cycle from i until it lands inside
  // [0, n) again restricts it to a permutation of [0, n) (n > 4^half_bits / 4, so few steps).
  uint64_t x = feistel(i);
  while (x >= n_) x = feistel(x);
  return x;
}

// ---- BatchLoader ---------------------------------------------------------------------------------

BatchLoader::BatchLoader(const TokenStream& tokens, int world_size, int rank, int micro_batch, int seq_len,
                         int accum, ShuffleSpec shuffle)
    : tokens_(&tokens), W_(world_size), r_(rank), B_(micro_batch), T_(seq_len), G_(accum), shuffle_(shuffle) {
  ZDP_REQUIRE(world_size > 0, "world size must be positive, got {}", world_size);
  ZDP_REQUIRE(rank >= 0 && rank < world_size, "rank {} is outside [0, {})", rank, world_size);
  ZDP_REQUIRE(micro_batch > 0, "--micro-batch must be positive, got {}", micro_batch);
  ZDP_REQUIRE(seq_len > 0, "--seq must be positive, got {}", seq_len);
  ZDP_REQUIRE(accum > 0, "--accum must be positive, got {}", accum);
  ZDP_CHECK(tokens.size() > 0, "token stream {} is empty", tokens.describe());
  if (shuffle_.enabled) {
    windows_ = (tokens.size() - 1) / static_cast<uint64_t>(T_);
    ZDP_REQUIRE(windows_ >= 1,
                "{}: {} tokens hold no window of --seq {} + 1 tokens to shuffle (--shuffle on needs at least {})",
                tokens.describe(), tokens.size(), T_, static_cast<uint64_t>(T_) + 1);
  }
}

uint64_t first_sequence_of(uint64_t step, int micro_step, int world_size, int rank, int micro_batch, int accum) {
  ZDP_CHECK(micro_step >= 0 && micro_step < accum, "micro-step {} of {}", micro_step, accum);
  const u128 q = ((static_cast<u128>(step) * static_cast<u128>(accum) + static_cast<u128>(micro_step)) *
                      static_cast<u128>(world_size) +
                  static_cast<u128>(rank)) *
                 static_cast<u128>(micro_batch);
  ZDP_CHECK(q >> 64 == 0, "step {} is too far into the data", step);
  return static_cast<uint64_t>(q);
}

uint64_t BatchLoader::first_sequence(uint64_t step, int micro_step) const {
  return first_sequence_of(step, micro_step, W_, r_, B_, G_);
}

std::string BatchLoader::describe() const { return tokens_->describe(); }

size_t BatchLoader::offset(uint64_t step, int micro_step) const {
  // In 128 bits: q·T overflows 64 bits only for absurd steps, but costs nothing to get right.
  const u128 off = static_cast<u128>(first_sequence(step, micro_step)) * static_cast<u128>(T_);
  return static_cast<size_t>(off % static_cast<u128>(tokens_->size()));
}

size_t BatchLoader::sequence_start(uint64_t q) const {
  if (!shuffle_.enabled)
    return static_cast<size_t>(static_cast<u128>(q) * static_cast<u128>(T_) % static_cast<u128>(tokens_->size()));
  const WindowPermutation perm(windows_, shuffle_.seed, q / windows_);
  return static_cast<size_t>(perm(q % windows_) * static_cast<uint64_t>(T_));
}

void BatchLoader::load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const {
  const size_t n = tokens_per_micro_batch();
  if (shuffle_.enabled) {
    // Window by window; a window never runs past the end of the stream (K·T + 1 ≤ N), but may
    // straddle two shards.
    const uint64_t q0 = first_sequence(step, micro_step);
    const size_t T = static_cast<size_t>(T_);
    for (size_t b = 0; b < static_cast<size_t>(B_); ++b) {
      const uint64_t w = sequence_start(q0 + b);
      tokens_->read(w, T, inputs + b * T);
      tokens_->read(w + 1, T, targets + b * T);
    }
    return;
  }
  // The B·T+1 tokens from the offset: inputs the first B·T, targets the last B·T (both wrap around
  // the stream's end).
  const uint64_t pos = offset(step, micro_step);
  tokens_->read(pos, n, inputs);
  tokens_->read(pos + 1, n, targets);
}

// ---- EvalWindows ---------------------------------------------------------------------------------

EvalWindows::EvalWindows(uint64_t windows, int world_size, int rank, int micro_batch, int seq_len)
    : K_(windows), W_(world_size), r_(rank), B_(micro_batch), T_(seq_len) {
  ZDP_REQUIRE(windows >= 1, "validation needs at least one window of --seq {} tokens", seq_len);
  ZDP_REQUIRE(world_size > 0, "world size must be positive, got {}", world_size);
  ZDP_REQUIRE(rank >= 0 && rank < world_size, "rank {} is outside [0, {})", rank, world_size);
  ZDP_REQUIRE(micro_batch > 0, "--micro-batch must be positive, got {}", micro_batch);
  ZDP_REQUIRE(seq_len > 0, "--seq must be positive, got {}", seq_len);
  const uint64_t per_rank = (K_ + static_cast<uint64_t>(W_) - 1) / static_cast<uint64_t>(W_);  // rank 0's, the most
  passes_ = (per_rank + static_cast<uint64_t>(B_) - 1) / static_cast<uint64_t>(B_);
}

int64_t EvalWindows::window(uint64_t pass, int b) const {
  ZDP_CHECK(pass < passes_ && b >= 0 && b < B_, "slot {} of pass {} ({} passes of {})", b, pass, passes_, B_);
  const u128 q = (static_cast<u128>(pass) * static_cast<u128>(B_) + static_cast<u128>(b)) * static_cast<u128>(W_) +
                 static_cast<u128>(r_);
  return q < K_ ? static_cast<int64_t>(q) : -1;
}

void EvalWindows::load(const TokenStream& tokens, uint64_t pass, int32_t* inputs, int32_t* targets) const {
  const size_t T = static_cast<size_t>(T_);
  ZDP_CHECK(tokens.size() >= K_ * T + 1, "{} tokens for {} windows of {}", tokens.size(), K_, T);
  for (int b = 0; b < B_; ++b) {
    const int64_t q = window(pass, b);
    const uint64_t start = static_cast<uint64_t>(q < 0 ? 0 : q) * T;
    tokens.read(start, T, inputs + static_cast<size_t>(b) * T);
    tokens.read(start + 1, T, targets + static_cast<size_t>(b) * T);
  }
}

}  // namespace zerodp::data
