// The planner's own shorthand for a model's units and the settings' predicates, shared by its memory
// (estimator.cpp) and traffic (traffic.cpp) estimates. Internal to plan/: the engine's rules themselves
// are called from zero/ and comm/ (zero::shard_elements, zero::GatherPlan, comm's staging).
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/layout.h"
#include "plan/estimator.h"
#include "zero/sharding.h"

namespace zerodp::plan::detail {

// The settings' counts are validated non-negative (zero::check_zero_modes); the formulas are unsigned.
inline uint64_t u64(int64_t n) { return static_cast<uint64_t>(n); }

inline uint64_t shard_of(uint64_t n, uint64_t W) { return zero::shard_elements(n, W); }

// ⌊mult·(W−1)·n / W⌋ without overflow: the ring bytes of docs/reference/metrics.md#traffic.
inline uint64_t ring(uint64_t n, uint64_t mult, uint64_t W) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(n) * mult * (W - 1) / W);
}

// The units of a model: unit 0 (the embeddings, and the head when tied), one per block (all the
// same size), and an untied head's own unit after them (h: none when tied).
struct Units {
  uint64_t n0 = 0, nb = 0, nh = 0;  // real elements
  uint64_t p0 = 0, pb = 0, ph = 0;  // padded, P = W·S
  uint64_t s0 = 0, sb = 0, sh = 0;  // shards
  uint64_t L = 0;
  bool head_unit() const { return nh > 0; }
  // f(real, padded, shard, count) for unit 0, the L blocks together and an untied head.
  template <class F>
  void each_kind(F&& f) const {
    f(n0, p0, s0, uint64_t{1});
    f(nb, pb, sb, L);
    if (head_unit()) f(nh, ph, sh, uint64_t{1});
  }
  // f(real, padded, shard) for each unit in unit order.
  template <class F>
  void each_unit(F&& f) const {
    f(n0, p0, s0);
    for (uint64_t k = 0; k < L; ++k) f(nb, pb, sb);
    if (head_unit()) f(nh, ph, sh);
  }
};
inline Units units_of(const model::ModelConfig& g, uint64_t W) {
  const model::ParamLayout layout(g);
  Units u;
  u.L = static_cast<uint64_t>(g.n_layer());
  u.n0 = layout.unit_numel(model::ParamLayout::kEmbeddingUnit);
  u.nb = layout.unit_numel(model::ParamLayout::block_unit(0));
  if (layout.head_unit() != model::ParamLayout::kEmbeddingUnit) u.nh = layout.unit_numel(layout.head_unit());
  u.s0 = shard_of(u.n0, W);
  u.sb = shard_of(u.nb, W);
  u.sh = u.nh > 0 ? shard_of(u.nh, W) : 0;
  u.p0 = u.s0 * W;
  u.pb = u.sb * W;
  u.ph = u.sh * W;
  return u;
}

// The stored gradient's bytes an element, and the dtype gradients travel in (zero/settings.h).
inline uint64_t grad_bytes(const PlanInput& in) { return dtype_size(in.precision.grad_store_dtype()); }
inline DType reduce_dtype(const PlanInput& in) { return in.precision.grad_reduce_dtype(); }
inline uint64_t reduce_bytes(const PlanInput& in) { return dtype_size(reduce_dtype(in)); }

// ZeRO++ at the stages it applies to (zero/settings.h): qwZ and hpZ at stage 3, qgZ at stages 2-3.
inline bool quantized_weights(const PlanInput& in) { return in.zero.stage == 3 && in.zero.zero_quantized_weights; }
inline bool quantized_gradients(const PlanInput& in) { return in.zero.stage >= 2 && in.zero.zero_quantized_gradients; }
inline uint64_t hpz_of(const PlanInput& in) { return in.zero.stage == 3 ? u64(in.zero.zero_hpz_partition_size) : 1; }
// hpZ keeps secondary slices (a unit freed after its forward is gathered again for its backward).
inline bool keeps_slices(const PlanInput& in) { return hpz_of(in) > 1 && in.zero.reshard_after_forward; }
// Stage 3 keeps a unit of fewer than stage3_param_persistence_threshold elements whole on every rank
// (zero/model_states.h): never gathered for a use, all-gathered after each update as at stages 1-2.
inline bool kept_whole(const PlanInput& in, uint64_t numel) {
  return in.zero.stage == 3 && numel < u64(in.zero.stage3_param_persistence_threshold);
}
// The reduce-scatters run in two levels (comm/host_layout.h): several hosts of several ranks, asked for.
inline bool reduce_scatters_in_two_levels(const PlanInput& in) {
  return in.two_level && in.ranks_per_host > 1 && in.ranks_per_host < in.world;
}

// Hybrid sharding: N < W at a sharded stage.
inline bool is_hybrid(const PlanInput& in) { return in.zero.stage >= 1 && in.zero.shard_group_size > 0 && in.zero.shard_group_size < in.world; }
// The same input as an N-rank run: what one group holds and moves within itself.
inline PlanInput as_group(const PlanInput& in) {
  PlanInput q = in;
  q.world = static_cast<int>(in.zero.shard_group_size);
  q.zero.shard_group_size = 0;
  // The group's hosts: L of its ranks on each when L divides N; within one host when N < L (otherwise
  // irregular: taken as one host, not modelled).
  if (in.ranks_per_host > 0 && q.world % in.ranks_per_host != 0) q.ranks_per_host = 0;
  return q;
}

}  // namespace zerodp::plan::detail
