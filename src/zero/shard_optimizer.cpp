#include "zero/shard_optimizer.h"

#include <algorithm>

#include "core/memory.h"
#include "core/stochastic_round.h"
#include "optim/optimizer.h"
#include "zero/sharding.h"

namespace zerodp::zero {

namespace {

// The streams of stochastic rounding (core/stochastic_round.h): optimizer state k draws from k, the
// weights (bf16_master_weights) from this.
constexpr uint64_t kWeightsStream = 2;

}  // namespace

// One update's fp32 views of what is not fp32 where it lives: 16-bit gradients, bf16 optimizer states
// and bf16 weights (without fp32 masters) are widened a chunk at a time into buffers (act) that live
// through the update; the states and weights are rounded back stochastically, element i of unit u
// drawing from (seed, t, what, u; i) wherever it is sharded.
class ShardOptimizer::Chunk {
 public:
  Chunk(ModelStates& st, const EngineConfig& cfg, int64_t t, size_t cap)
      : st_(st), dev_(cfg.dev()), seed_(cfg.seed), t_(static_cast<uint64_t>(t)),
        K_(st.num_states()), wide_states_(st.state_dtype() != DType::kF32),
        wide_weights_(st.weights_dtype() != DType::kF32) {
    const size_t planes = (st.grad_dtype() != DType::kF32) + (wide_states_ ? K_ : 0) + wide_weights_;
    buffer_ = dev_.allocate(planes * cap * sizeof(float), MemCategory::kAct);
    float* next = buffer_.as<float>();
    const auto take = [&](bool needed) { return needed ? std::exchange(next, next + cap) : nullptr; };
    g_ = take(st.grad_dtype() != DType::kF32);
    for (int k = 0; k < K_; ++k) s_[k] = take(wide_states_);
    w_ = take(wide_weights_);
  }

  // Elements [c, c + n) of unit u: fp32 pointers to its gradient, its weights and its first `planes`
  // states.
  const float* grad(int u, size_t c, size_t n) {
    if (!g_) return reinterpret_cast<const float*>(st_.grad_at(u, c));
    dev_.convert(st_.grad_at(u, c), st_.grad_dtype(), g_, DType::kF32, n);
    return g_;
  }
  float* weights(int u, size_t c, size_t n) {
    if (!w_) return st_.weights_at(u, c);
    dev_.convert(st_.weights_bytes(u, c), st_.weights_dtype(), w_, DType::kF32, n);
    return w_;
  }
  void load_states(int u, size_t c, size_t n, int planes) {
    for (int k = 0; k < planes && wide_states_; ++k)
      dev_.convert(st_.state_bytes(k, u, c), st_.state_dtype(), s_[k], DType::kF32, n);
  }
  float* state(int k, int u, size_t c) const {
    if (k >= K_) return nullptr;
    return wide_states_ ? s_[k] : st_.state_at(k, u, c);
  }

  // Writes the chunk's new states back (bf16 states) and its new weights where they go: rounded
  // stochastically into bf16 weights, or from the fp32 weights into the 16-bit parameters.
  void store_states(int u, size_t c, size_t n, int planes) {
    for (int k = 0; k < planes && wide_states_; ++k)
      dev_.round_bf16_stochastic(s_[k], st_.state_bytes(k, u, c), n, stream(static_cast<uint64_t>(k), u), c);
  }
  void store_weights(int u, size_t c, size_t n, float* w) {
    if (w_) {
      dev_.round_bf16_stochastic(w_, st_.weights_bytes(u, c), n, stream(kWeightsStream, u), c);
    } else if (st_.mixed()) {
      // The compute-dtype copy of the chunk just updated, while it is still in cache.
      dev_.convert(w, DType::kF32, st_.param_at(u, c), st_.param_dtype(), n);
    }
  }

 private:
  uint64_t stream(uint64_t what, int u) const { return rounding_stream(seed_, t_, what, static_cast<uint64_t>(u)); }

  ModelStates& st_;
  device::Device& dev_;
  const uint64_t seed_, t_;
  const int K_;
  const bool wide_states_, wide_weights_;
  Buffer buffer_;
  float* g_ = nullptr;
  float* s_[2] = {nullptr, nullptr};
  float* w_ = nullptr;
};

void ShardOptimizer::update(double lr, float grad_scale) {
  const int64_t t = steps_ + 1;
  if (states_.offload()) {
    update_offloaded(lr, grad_scale, t);
    ++steps_;
    return;
  }
  const optim::OptimizerKind kind = cfg_.optimizer.kind;
  const bool muon = kind == optim::OptimizerKind::kMuon;
  // Muon's other tensors take AdamW at their own share of the step's lr.
  const optim::AdamWParams adam = optim::adamw_params(cfg_.optimizer, muon ? lr * cfg_.optimizer.adam_lr_ratio : lr);
  const optim::SGDParams sgd = optim::sgd_params(cfg_.optimizer, lr);
  const optim::MuonParams muon_hp = optim::muon_params(cfg_.optimizer, lr);
  // The chunks are no larger than the largest range a rank updates: a whole unit at stage 0, a shard
  // otherwise (sized alike on every rank, as the planner sizes them, though the last rank's ranges end
  // short).
  size_t largest = 0;
  for (int u = 0; u < states_.num_units(); ++u) {
    const UnitShard& s = states_.unit(u);
    largest = std::max(largest, states_.stage() == 0 ? s.numel : std::min(s.shard, s.numel));
  }
  device::Device& dev = cfg_.dev();
  // On the CPU a chunk stays in cache; on a GPU each call is a launch.
  const size_t chunk = dev.host_addressable() ? kWorkChunk : kDeviceWorkChunk;
  Chunk wide(states_, cfg_, t, std::min(chunk, largest));
  if (muon) muon_.begin();
  for (int u = 0; u < states_.num_units(); ++u) {
    const auto [b, e] = states_.update_range(u);
    const std::vector<Segment> segments = unit_segments(states_.layout(), u, b, e);
    for (const Segment& seg : segments) {
      const bool matrix = muon && seg.tensor->matrix;
      const int planes = matrix ? 1 : states_.num_states();  // a Muon matrix has its momentum only
      for (size_t c = seg.begin; c < seg.begin + seg.count; c += chunk) {
        const size_t n = std::min(chunk, seg.begin + seg.count - c);
        const float* g = wide.grad(u, c, n);
        wide.load_states(u, c, n, planes);
        if (matrix) {
          // The direction only; the weights change once the whole matrix is orthogonalised.
          dev.muon_momentum(g, wide.state(0, u, c), muon_.direction(c), n, optim::muon_scalars(muon_hp, 1, 1, grad_scale));
          wide.store_states(u, c, n, planes);
          continue;
        }
        float* w = wide.weights(u, c, n);
        if (kind == optim::OptimizerKind::kSGD)
          dev.sgd_update(w, g, wide.state(0, u, c), n, sgd, t, seg.decay, grad_scale);
        else
          dev.adamw_update(w, g, wide.state(0, u, c), wide.state(1, u, c), n, adam, t, seg.decay, grad_scale);
        wide.store_states(u, c, n, planes);
        wide.store_weights(u, c, n, w);
      }
    }
    // Every rank of the group takes part in a unit's exchange, even one whose range holds no matrix.
    if (!muon || !unit_has_matrix(states_.layout(), u)) continue;
    muon_.orthogonalise(u);
    for (const Segment& seg : segments) {
      if (!seg.tensor->matrix) continue;
      const optim::MuonScalars s =
          optim::muon_scalars(muon_hp, seg.tensor->shape.at(0), seg.tensor->shape.at(1), grad_scale);
      for (size_t c = seg.begin; c < seg.begin + seg.count; c += chunk) {
        const size_t n = std::min(chunk, seg.begin + seg.count - c);
        float* w = wide.weights(u, c, n);
        dev.muon_apply(w, muon_.direction(c), n, s);
        wide.store_weights(u, c, n, w);
      }
    }
  }
  if (muon) muon_.end();
  ++steps_;
}

}  // namespace zerodp::zero
