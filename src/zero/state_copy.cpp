#include "zero/state_copy.h"

#include <cstring>

#include "core/error.h"

namespace zerodp::zero {

StateCopyBytes state_copy_bytes(uint64_t shard_elements, uint64_t units, int optimizer_states) {
  const uint64_t array = shard_elements * sizeof(float), align = units * kFileBlock;
  return {array + align, array * static_cast<uint64_t>(optimizer_states) + align};
}

StateCopy StateCopy::allocate(const Engine& engine) {
  const ShardLayout& shards = engine.shards();
  const StateCopyBytes bytes =
      state_copy_bytes(shards.total_shard(), static_cast<uint64_t>(shards.num_units()), engine.num_optimizer_states());
  device::Device& dev = engine.config().dev();
  StateCopy c;
  c.weights_ = dev.allocate_host(bytes.master, MemCategory::kMaster);
  c.states_ = dev.allocate_host(bytes.optim, MemCategory::kOptim);
  dev.host().fill_zero(c.weights_.data(), c.weights_.size());  // resident now
  dev.host().fill_zero(c.states_.data(), c.states_.size());
  return c;
}

namespace {

// The first byte at or after `at` in `buffer` whose address equals `file_offset` modulo kFileBlock.
size_t aligned_to_file(const Buffer& buffer, size_t at, uint64_t file_offset) {
  const uint64_t address = reinterpret_cast<uintptr_t>(buffer.data()) + at;
  return at + static_cast<size_t>((file_offset - address) % kFileBlock);
}

}  // namespace

void StateCopy::lay_out(const Engine& engine, uint64_t data_offset) {
  const ShardLayout& shards = engine.shards();
  const size_t K = static_cast<size_t>(engine.num_optimizer_states());
  ranges_.clear();
  into_.clear();
  // Each unit's slot in an array is its S floats and one block, which takes whatever the alignment
  // skips: a piece never runs into the next unit's slot, and the last ends within the buffer.
  size_t w_slot = 0, s_slot = 0;
  uint64_t file = data_offset;
  for (int u = 0; u < shards.num_units(); ++u) {
    const UnitShard& s = shards.unit(u);
    if (s.own_begin < s.own_end) {
      const size_t n = s.own_end - s.own_begin;
      const size_t w_at = aligned_to_file(weights_, w_slot, file);
      file += n * sizeof(float);
      const size_t s_at = aligned_to_file(states_, s_slot, file);
      file += K * n * sizeof(float);
      Engine::OwnedCopy c{reinterpret_cast<float*>(weights_.as<char>() + w_at), {}};
      Engine::OwnedRange r{u, s.own_begin, s.own_end, c.weights, {}};
      for (size_t k = 0; k < K; ++k) {
        c.states.push_back(reinterpret_cast<float*>(states_.as<char>() + s_at) + k * n);
        r.states.push_back(c.states.back());
      }
      into_.push_back(std::move(c));
      ranges_.push_back(std::move(r));
    }
    w_slot += s.shard * sizeof(float) + kFileBlock;
    s_slot += K * s.shard * sizeof(float) + kFileBlock;
  }
  ZDP_CHECK(w_slot == weights_.size() && s_slot == states_.size(), "a state copy of {} + {} bytes laid out in {} + {}",
            weights_.size(), states_.size(), w_slot, s_slot);
}

void StateCopy::refresh(const Engine& engine, uint64_t data_offset) {
  lay_out(engine, data_offset);
  engine.copy_owned(into_);
}

void StateCopy::fill(size_t i, const Engine::OwnedRange& from) {
  const Engine::OwnedRange& r = ranges_.at(i);
  ZDP_CHECK(from.unit == r.unit && from.begin == r.begin && from.end == r.end && from.states.size() == r.states.size(),
            "filling the copy of unit {} from unit {}", r.unit, from.unit);
  const size_t bytes = (r.end - r.begin) * sizeof(float);
  std::memcpy(into_[i].weights, from.weights, bytes);
  for (size_t k = 0; k < r.states.size(); ++k) std::memcpy(into_[i].states[k], from.states[k], bytes);
}

void StateCopy::release() {
  weights_.release();
  states_.release();
  ranges_.clear();
  into_.clear();
}

}  // namespace zerodp::zero
