#include "zero/shard_optimizer.h"

#include <algorithm>

#include "core/memory.h"
#include "core/stochastic_round.h"
#include "optim/optimizer.h"
#include "zero/sharding.h"

namespace zerodp::zero {

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
  const DType gdt = states_.grad_dtype();
  // Gradients stored in 16 bits are widened chunk by chunk (working memory: act), a chunk no larger than
  // the largest range a rank updates: a whole unit at stage 0, a shard otherwise (sized alike on every
  // rank, as the planner sizes it, though the last rank's ranges end short).
  size_t largest = 0;
  for (int u = 0; u < states_.num_units(); ++u) {
    const UnitShard& s = states_.unit(u);
    largest = std::max(largest, states_.stage() == 0 ? s.numel : std::min(s.shard, s.numel));
  }
  device::Device& dev = cfg_.dev();
  // On the CPU a chunk's widened gradient stays in cache; on a GPU each call is a launch.
  const size_t chunk = dev.host_addressable() ? kWorkChunk : kDeviceWorkChunk;
  const size_t cap = std::min(chunk, largest);
  Buffer g32 = dev.allocate(gdt == DType::kF32 ? 0 : cap * sizeof(float), MemCategory::kAct);
  // bf16 optimizer states are widened chunk by chunk too, each plane into its fp32 chunk (act), and
  // rounded back stochastically: element i of unit u's state k at step t draws from (seed, t, k, u; i),
  // wherever it is sharded.
  const int K = states_.num_states();
  const bool bf16_states = states_.state_dtype() != DType::kF32;
  Buffer s32 = dev.allocate(bf16_states ? K * cap * sizeof(float) : 0, MemCategory::kAct);
  const auto state = [&](int k, int u, size_t c) -> float* {
    if (k >= K) return nullptr;
    return bf16_states ? s32.as<float>() + k * cap : states_.state_at(k, u, c);
  };
  if (muon) muon_.begin();
  for (int u = 0; u < states_.num_units(); ++u) {
    const auto [b, e] = states_.update_range(u);
    const std::vector<Segment> segments = unit_segments(states_.layout(), u, b, e);
    for (const Segment& seg : segments) {
      const bool matrix = muon && seg.tensor->matrix;
      for (size_t c = seg.begin; c < seg.begin + seg.count; c += chunk) {
        const size_t n = std::min(chunk, seg.begin + seg.count - c);
        const float* g;
        if (gdt == DType::kF32) {
          g = reinterpret_cast<const float*>(states_.grad_at(u, c));
        } else {
          dev.convert(states_.grad_at(u, c), gdt, g32.as<float>(), DType::kF32, n);
          g = g32.as<float>();
        }
        float* w = states_.weights_at(u, c);
        const int planes = matrix ? 1 : K;  // a Muon matrix has its momentum only
        for (int k = 0; k < planes && bf16_states; ++k)
          dev.convert(states_.state_bytes(k, u, c), DType::kBF16, state(k, u, c), DType::kF32, n);
        if (matrix) {
          // The direction only; the weights change once the whole matrix is orthogonalised.
          dev.muon_momentum(g, state(0, u, c), muon_.direction(c), n, optim::muon_scalars(muon_hp, 1, 1, grad_scale));
        } else if (kind == optim::OptimizerKind::kSGD) {
          dev.sgd_update(w, g, state(0, u, c), n, sgd, t, seg.decay, grad_scale);
        } else {
          dev.adamw_update(w, g, state(0, u, c), state(1, u, c), n, adam, t, seg.decay, grad_scale);
        }
        for (int k = 0; k < planes && bf16_states; ++k)
          dev.round_bf16_stochastic(state(k, u, c), states_.state_bytes(k, u, c), n,
                                    rounding_stream(cfg_.seed, static_cast<uint64_t>(t), static_cast<uint64_t>(k),
                                                    static_cast<uint64_t>(u)),
                                    c);
        if (matrix) continue;
        // The compute-dtype copy of the chunk just updated, while it is still in cache.
        if (states_.mixed()) dev.convert(w, DType::kF32, states_.param_at(u, c), states_.param_dtype(), n);
      }
    }
    // Every rank of the group takes part in a unit's exchange, even one whose range holds no matrix.
    if (!muon || !unit_has_matrix(states_.layout(), u)) continue;
    muon_.orthogonalise(u);
    for (const Segment& seg : segments) {
      if (!seg.tensor->matrix) continue;
      const optim::MuonScalars s =
          optim::muon_scalars(muon_hp, seg.tensor->shape.at(0), seg.tensor->shape.at(1), grad_scale);
      float* w = states_.weights_at(u, seg.begin);
      dev.muon_apply(w, muon_.direction(seg.begin), seg.count, s);
      if (states_.mixed()) dev.convert(w, DType::kF32, states_.param_at(u, seg.begin), states_.param_dtype(), seg.count);
    }
  }
  if (muon) muon_.end();
  ++steps_;
}

}  // namespace zerodp::zero
