#include "plan/estimator.h"

#include <climits>
#include <optional>
#include <vector>

#include "comm/host_layout.h"
#include "core/quantize.h"
#include "model/layout.h"
#include "plan/plan_rules.h"
#include "zero/gather_plan.h"
#include "zero/muon_step.h"

namespace zerodp::plan {

using namespace detail;

uint64_t traffic_inter_group_bytes_per_step(const PlanInput& in) {
  in.validate();
  if (!is_hybrid(in)) return 0;
  // Once a step, each rank's shard of the gradient (S elements of the reduction dtype) all-reduced
  // over the W/N ranks that hold it, one in each group.
  const PlanInput q = as_group(in);
  const uint64_t shard = param_counts(q).padded / static_cast<uint64_t>(q.world);
  return ring(shard * reduce_bytes(in), 2, static_cast<uint64_t>(in.world / in.zero.shard_group_size));
}

namespace {
// Stage 3's all-gathers of one micro-step, unit by unit, as zero/gather_plan.h replays the engine on
// the model's schedule: how many over all ranks and how many from hpZ's slices (GPT-2: every unit twice
// over all ranks, or once and once from the slices; an untied head and a Llama's unit 0 once). A bare
// parameter count is one unit gathered for the forward and again for the backward.
struct UnitGathers {
  uint64_t padded = 0, shard = 0;  // elements
  uint64_t full = 0, slices = 0;
  bool whole = false;  // kept whole: no gathers for its uses, one all-gather after each update
};
std::vector<UnitGathers> stage3_gathers(const PlanInput& in) {
  const uint64_t W = static_cast<uint64_t>(in.world);
  const bool hpz = hpz_of(in) > 1;
  if (!in.model) {
    if (kept_whole(in, in.params)) return {{in.params, (in.params + W - 1) / W, 0, 0, true}};
    const uint64_t again = hpz && in.zero.reshard_after_forward ? 1 : 0;
    return {{in.params, (in.params + W - 1) / W, 2 - again, again, false}};
  }
  const Units u = units_of(*in.model, W);
  const model::ParamLayout layout(*in.model);
  std::vector<UnitGathers> units(static_cast<size_t>(layout.num_units()));
  for (size_t k = 0; k < units.size(); ++k) {
    const bool block = k >= 1 && k <= u.L;
    units[k].padded = k == 0 ? u.p0 : block ? u.pb : u.ph;
    units[k].shard = k == 0 ? u.s0 : block ? u.sb : u.sh;
    units[k].whole = kept_whole(in, k == 0 ? u.n0 : block ? u.nb : u.nh);
  }
  const model::UnitSchedule& schedule = layout.schedule();
  const zero::GatherPlan plan(schedule, in.zero.reshard_after_forward, hpz);
  for (size_t r = 0; r < schedule.param_reads().size(); ++r) {
    UnitGathers& g = units[static_cast<size_t>(schedule.param_reads()[r])];
    if (g.whole) continue;
    if (zero::GatherPlan::from_slices(plan.source(r))) {
      ++g.slices;
    } else if (zero::GatherPlan::gathers(plan.source(r))) {
      ++g.full;
    }
  }
  return units;
}

// Bytes one rank sends for one gather of a unit over all ranks: its shard in the compute dtype, or
// with qwZ as int8 blocks with fp32 scales.
uint64_t full_gather_bytes(const PlanInput& in, const UnitGathers& g) {
  const uint64_t W = static_cast<uint64_t>(in.world);
  return quantized_weights(in) ? (W - 1) * quantized_int8_bytes(g.shard)
                               : ring(g.padded * dtype_size(in.precision.dtype), 1, W);
}
// ... and from hpZ's slices, within its P ranks.
uint64_t slice_gather_bytes(const PlanInput& in, const UnitGathers& g) {
  return ring(g.padded * dtype_size(in.precision.dtype), 1, hpz_of(in));
}
}  // namespace

uint64_t traffic_bytes_per_step(const PlanInput& in) {
  in.validate();
  // Hybrid sharding: the group's own collectives (an N-rank run's, less its scalar all-reduce), the
  // all-reduce across groups, and the scalar all-reduce over all W ranks.
  if (is_hybrid(in)) {
    const PlanInput q = as_group(in);
    return traffic_bytes_per_step(q) - ring(8, 2, static_cast<uint64_t>(q.world)) +
           traffic_inter_group_bytes_per_step(in) + ring(8, 2, static_cast<uint64_t>(in.world));
  }
  const uint64_t W = static_cast<uint64_t>(in.world), G = static_cast<uint64_t>(in.accum);
  const uint64_t psi = param_counts(in).padded;
  const uint64_t np = psi * dtype_size(in.precision.dtype), ng = psi * reduce_bytes(in);
  uint64_t bytes = 0;
  switch (in.zero.stage) {
    case 0: bytes = ring(ng, 2, W); break;                    // all-reduce
    case 1: bytes = ring(ng, 1, W) + ring(np, 1, W); break;   // reduce-scatter + all-gather
    case 2: bytes = ring(G * ng, 1, W) + ring(np, 1, W); break;
    case 3:  // each micro-step's gathers and a reduce-scatter
      bytes = ring(G * ng, 1, W);
      for (const UnitGathers& g : stage3_gathers(in)) {
        bytes += G * (g.full * full_gather_bytes(in, g) + g.slices * slice_gather_bytes(in, g));
        if (g.whole) bytes += ring(g.padded * dtype_size(in.precision.dtype), 1, W);  // after the update
      }
      break;
  }
  // Muon: each unit with a matrix exchanged in fp32 (zero/muon_step.h), an all-reduce's worth at every stage.
  if (in.muon) bytes += ring(4 * zero::muon_exchanged_elements(model::ParamLayout(*in.model), in.world), 2, W);
  return bytes + ring(8, 2, W);  // the loss sum and squared norm, two fp32
}

std::optional<uint64_t> traffic_inter_host_bytes_per_step(const PlanInput& in) {
  in.validate();
  const int L = in.ranks_per_host;
  if (L == 0 || L == in.world) return 0;
  if (in.muon) return std::nullopt;  // Muon's fp32 exchanges across hosts: not modelled
  const uint64_t W = static_cast<uint64_t>(in.world), H = W / static_cast<uint64_t>(L), G = static_cast<uint64_t>(in.accum);
  // Flat collectives by the ring model: the H ranks whose successor is on the next host (the last of
  // each) send their whole ring share across.
  const auto flat = [&](uint64_t full_bytes, uint64_t times) { return H * ring(full_bytes, times, W); };
  const uint64_t scalar = flat(8, 2);  // the loss sum and squared norm: an all-reduce over all W ranks
  if (is_hybrid(in)) {
    if (in.zero.shard_group_size != L) return std::nullopt;
    // Groups are the hosts: only the all-reduce of each rank's gradient shard across the groups
    // crosses, over a ring whose every member is on another host.
    return W * traffic_inter_group_bytes_per_step(in) + scalar;
  }
  const uint64_t psi = param_counts(in).padded, p = dtype_size(in.precision.dtype), r = reduce_bytes(in);
  const uint64_t np = psi * p, ng = psi * r;
  const bool two = in.two_level && L > 1;
  // Summed over the ranks: an all-gather of a full buffer of n bytes sends (H − 1)·n across in two
  // levels; a reduce-scatter of a unit of P elements (shard S) sends the fp32 partial sums over H − 1
  // host boundaries and the last host's finished chunks, (H − 1)·(4P + P·r/H), or with qgZ both as
  // int8 pieces, L·(H − 1)·(H + 1)·quantized_chunk_bytes(S) (comm/host_layout.h's counts, per rank).
  const auto gather = [&](uint64_t n) { return two ? (H - 1) * n : flat(n, 1); };
  const auto scatter_unit = [&](uint64_t P, uint64_t S) -> uint64_t {
    if (!two) return flat(P * r, 1);
    if (quantized_gradients(in)) return static_cast<uint64_t>(L) * (H - 1) * (H + 1) * comm::quantized_chunk_bytes(S);
    return (H - 1) * (4 * P + P * r / H);
  };
  uint64_t scatter = 0;  // one micro-step's reduce-scatters
  if (in.model) {
    const Units u = units_of(*in.model, W);
    u.each_kind([&](uint64_t, uint64_t P, uint64_t S, uint64_t count) { scatter += count * scatter_unit(P, S); });
  } else {
    scatter = scatter_unit(psi, (psi + W - 1) / W);
  }
  switch (in.zero.stage) {
    case 0: return flat(ng, 2) + scalar;
    case 1: return scatter + gather(np) + scalar;
    case 2: return G * scatter + gather(np) + scalar;
    default: break;
  }
  // Stage 3, gather by gather: over all ranks (with qwZ, W shards of int8 blocks as bytes, in two levels
  // while L times one fits an int), and from hpZ's slices within groups of P consecutive ranks: none
  // across when each group is within a host (P divides L), in two levels over the P/L hosts of each
  // when L divides P; other groupings are not modelled.
  const uint64_t P = hpz_of(in);
  uint64_t gathers = 0;
  uint64_t after_update = 0;  // the units kept whole, all-gathered once a step
  for (const UnitGathers& g : stage3_gathers(in)) {
    if (g.whole) after_update += gather(g.padded * p);
    if (quantized_weights(in)) {
      const uint64_t q = quantized_int8_bytes(g.shard);
      const bool two_q = two && static_cast<uint64_t>(L) * q <= static_cast<uint64_t>(INT_MAX);
      gathers += g.full * (two_q ? W * (H - 1) * q : H * (W - 1) * q);
    } else {
      gathers += g.full * gather(g.padded * p);
    }
    if (g.slices == 0 || static_cast<uint64_t>(L) % P == 0) continue;
    if (P % static_cast<uint64_t>(L) != 0) return std::nullopt;
    const uint64_t hosts = P / static_cast<uint64_t>(L), groups = W / P;
    gathers += g.slices * groups * (two ? (hosts - 1) * g.padded * p : hosts * ring(g.padded * p, 1, P));
  }
  return G * (gathers + scatter) + after_update + scalar;
}


}  // namespace zerodp::plan
