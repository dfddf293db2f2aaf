#include "zero/state_copy.h"

namespace zerodp::zero {

StateCopyBytes state_copy_bytes(uint64_t shard_elements, int optimizer_states) {
  const uint64_t array = shard_elements * sizeof(float);
  return {array, array * static_cast<uint64_t>(optimizer_states)};
}

StateCopy StateCopy::allocate(const Engine& engine) {
  const ShardLayout& shards = engine.shards();
  const int K = engine.num_optimizer_states();
  const StateCopyBytes bytes = state_copy_bytes(shards.total_shard(), K);
  device::Device& dev = engine.config().dev();
  StateCopy c;
  // One array of Σ S floats for the weights and one a state (state_copy_bytes' rule).
  c.weights_ = dev.allocate_host(bytes.master, MemCategory::kMaster);
  dev.host().fill_zero(c.weights_.data(), c.weights_.size());  // resident now
  for (int k = 0; k < K; ++k) {
    c.states_.push_back(dev.allocate_host(bytes.optim / static_cast<uint64_t>(K), MemCategory::kOptim));
    dev.host().fill_zero(c.states_.back().data(), c.states_.back().size());
  }
  size_t at = 0;
  for (int u = 0; u < shards.num_units(); ++u) {
    const UnitShard& s = shards.unit(u);
    if (s.own_begin < s.own_end) {
      Engine::OwnedRange r{u, s.own_begin, s.own_end, c.weights_.as<float>() + at, {}};
      for (Buffer& st : c.states_) r.states.push_back(st.as<float>() + at);
      c.ranges_.push_back(std::move(r));
    }
    at += s.shard;
  }
  return c;
}

void StateCopy::refresh(const Engine& engine) {
  std::vector<float*> states;
  for (Buffer& st : states_) states.push_back(st.as<float>());
  engine.copy_owned(weights_.as<float>(), states);
}

void StateCopy::release() {
  weights_.release();
  states_.clear();
  ranges_.clear();
}

}  // namespace zerodp::zero
