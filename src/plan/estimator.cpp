#include "plan/estimator.h"

#include <algorithm>

#include "comm/host_layout.h"
#include "comm/reduction_staging.h"
#include "core/error.h"
#include "core/quantize.h"
#include "model/layout.h"
#include "plan/activations.h"
#include "plan/async_copy.h"
#include "plan/plan_rules.h"
#include "zero/gather_plan.h"
#include "zero/model_states.h"
#include "zero/muon_step.h"
#include "zero/offload_rules.h"
#include "zero/optimizer_swap.h"
#include "zero/param_swap.h"
#include "zero/reduction_buckets.h"
#include "zero/reduction_plan.h"
#include "zero/sharding.h"

namespace zerodp::plan {


using namespace detail;

namespace {

// NVMe optimizer offload: the largest unit's window of one state's region (zero::states_window), the
// units' shards following each other in unit order (unit 0, then the blocks). Without a model (a bare
// parameter count) the units are unknown: not modelled.
uint64_t nvme_window_bytes(const PlanInput& in) {
  if (!in.model) return 0;
  const Units u = units_of(*in.model, static_cast<uint64_t>(in.world));
  uint64_t most = 0, off = 0;
  u.each_unit([&](uint64_t, uint64_t, uint64_t S) {
    most = std::max(most, zero::states_window(off, S).bytes);
    off += S;
  });
  return most;
}

// The communicator's staging for one sum in rank order (comm/reduction_staging.h).
uint64_t reduction_staging_bytes(bool all_reduce, uint64_t count, DType dtype, uint64_t W) {
  return comm::ordered_reduction_staging_bytes_for(all_reduce, count, dtype, static_cast<int>(W));
}

// The staging of a unit's reduce-scatter of shard S: the ordered reduction's, or over several hosts the
// two-level one's (comm/host_layout.h, two_level_staging; qgZ's holds the quantized pieces too).
uint64_t scatter_staging_bytes(const PlanInput& in, uint64_t S) {
  if (S > 0 && reduce_scatters_in_two_levels(in))
    return comm::two_level_staging_bytes(S, reduce_dtype(in), in.ranks_per_host, quantized_gradients(in));
  return reduction_staging_bytes(false, S, reduce_dtype(in), static_cast<uint64_t>(in.world));
}

// Stages 2-3: the communicator's one staging buffer grows to the largest reduction in flight: the
// largest of the units' reduce-scatters of their shards and the step's sum of two fp32 scalars (loss
// and squared norm).
uint64_t staging_bytes(const PlanInput& in, const Units& u) {
  const uint64_t W = static_cast<uint64_t>(in.world);
  return std::max({reduction_staging_bytes(true, 2, DType::kF32, W), scatter_staging_bytes(in, u.s0),
                   scatter_staging_bytes(in, u.sb), scatter_staging_bytes(in, u.sh)});
}

// The bytes of the gradient reductions in flight, oldest retired as the engine's reducer retires them
// (zero::InFlightWindow, zero::reductions_kept_in_flight).
struct OpenReductions {
  explicit OpenReductions(const PlanInput& in) : window(zero::reductions_kept_in_flight(in.zero)) {}
  void launch(uint64_t held) {
    bytes += held;
    window.push(held, [this](uint64_t retired) { bytes -= retired; });
  }
  bool all_waited() const { return window.empty(); }
  zero::InFlightWindow<uint64_t> window;
  uint64_t bytes = 0;
};

// Stage 3's prefetch (zero::prefetch_after) from a read followed by `remaining` blocks still sharded,
// with `live` elements gathered or in flight: how many it starts.
uint64_t prefetched_blocks(const PlanInput& in, const Units& u, uint64_t live, uint64_t remaining) {
  if (!zero::prefetches(in.zero)) return 0;
  uint64_t started = 0;
  struct Blocks {  // read k: the k-th block after the one in use
    uint64_t operator[](size_t k) const { return k; }
  };
  zero::prefetch_after(
      0, remaining + 1, Blocks{}, live, u64(in.zero.stage3_max_live_parameters),
      u64(in.zero.stage3_prefetch_bucket_size), [](uint64_t) { return true; }, [&](uint64_t) { return u.pb; },
      [](uint64_t) { return true; },
      [&](uint64_t, size_t) {
        live += u.pb;
        ++started;
      });
  return started;
}

// Stage 3 without reshard_after_forward: the peak of the gathered parameters and the staging of those
// in flight during a micro-step's forward, the prefetcher replayed (zero/param_gatherer.cpp): at each
// read it waits for the unit (its staging goes), then starts the next four reads' units that are still
// sharded, within stage3_max_live_parameters (all gathered or in flight) and
// stage3_prefetch_bucket_size (started by this call). Nothing is freed but an untied model's
// embeddings after their forward, their last read. `staged(S)`: what a unit of shard S holds in flight.
template <class Staged>
uint64_t keep_gathered_forward_bytes(const PlanInput& in, const Units& u, uint64_t p, Staged&& staged) {
  struct Unit {
    uint64_t P, S;
    bool gathered;  // sharded, so gathered for a read (not kept whole)
  };
  std::vector<Unit> units;
  u.each_unit([&](uint64_t numel, uint64_t P, uint64_t S) { units.push_back({P, S, !kept_whole(in, numel)}); });
  // The forward's reads: the embeddings, the blocks, the head (a tied head is unit 0).
  std::vector<size_t> reads(units.size());
  for (size_t k = 0; k < units.size(); ++k) reads[k] = k;
  if (!u.head_unit()) reads.push_back(0);
  enum : uint8_t { kSharded, kInFlight, kReady };
  std::vector<uint8_t> state(units.size(), kSharded);
  uint64_t live = 0, peak = 0;
  auto start = [&](size_t v) {
    state[v] = kInFlight;
    live += units[v].P;
  };
  for (size_t i = 0; i < reads.size(); ++i) {
    const size_t v = reads[i];
    if (units[v].gathered && state[v] == kSharded) start(v);
    if (units[v].gathered) state[v] = kReady;
    if (zero::prefetches(in.zero)) {
      zero::prefetch_after(
          i, reads.size(), reads, live, u64(in.zero.stage3_max_live_parameters),
          u64(in.zero.stage3_prefetch_bucket_size),
          [&](size_t w) { return units[w].gathered && state[w] == kSharded; }, [&](size_t w) { return units[w].P; },
          [](size_t) { return true; }, [&](size_t w, size_t) { start(w); });
    }
    uint64_t bytes = 0;
    for (size_t w = 0; w < units.size(); ++w)
      if (state[w] != kSharded) bytes += p * units[w].P + (state[w] == kInFlight ? staged(units[w].S) : 0);
    peak = std::max(peak, bytes);
    if (i == 0 && u.head_unit() && state[0] == kReady) {  // the untied embeddings' last read
      state[0] = kSharded;
      live -= units[0].P;
    }
  }
  return peak;
}

// Peak of `gathered` + `comm` during a step at stages 2-3, following the engine's backward
// (docs/planner.md): the head's backward, each block's, then the embedding's, micro-step after
// micro-step, with the reductions left in flight as the engine's reducer leaves them. A tied head
// is unit 0, whose gradient stays open from the head's backward to the embedding's; an untied one
// is a unit of its own, reduced as soon as its backward ends, before the blocks'.
uint64_t transient_bytes_stages23(const PlanInput& in, const Units& u) {
  const uint64_t p = dtype_size(in.precision.dtype);
  const uint64_t W = static_cast<uint64_t>(in.world);
  const uint64_t s3 = in.zero.stage == 3 ? 1 : 0;
  const bool untied = u.head_unit();
  // Each unit's fp32 gradient is a working buffer (`gathered`); a tied unit 0's stays open through
  // the backward (held beside every block's).
  const uint64_t wg0 = 4 * u.p0, held = untied ? 0 : wg0;
  // Each block gathered ahead of its backward holds, until it is waited for (the unit in use has
  // been, the ones prefetched ahead have not): with parameter offload its shard in a device staging
  // buffer (comm); with qwZ (and no hpZ, whose backward gathers the slices unquantized) its quantized
  // shard and every rank's (comm).
  auto staged_of = [&](uint64_t S) -> uint64_t {
    if (quantized_weights(in) && hpz_of(in) == 1) return (W + 1) * quantized_int8_bytes(S);
    if (in.zero.stage == 3 && in.zero.offload_param != Offload::kNone) return p * S;
    return 0;
  };
  const uint64_t staged = staged_of(u.sb);
  // Stage 3 gathers the blocks (s3b) and the head's unit (s3h) unless they are kept whole.
  const uint64_t ph = untied ? u.ph : u.p0;
  const uint64_t s3b = s3 && !kept_whole(in, u.nb) ? 1 : 0, s3h = s3 && !kept_whole(in, untied ? u.nh : u.n0) ? 1 : 0;
  // hpZ: every block's secondary slice (`gathered`), kept from its forward's gather until its
  // backward's has arrived (zero/gather_plan.h); a tied unit 0's goes with the head's forward.
  const uint64_t slice = keeps_slices(in) ? s3b * p * u.pb / hpz_of(in) : 0;
  // Without reshard_after_forward (stage 3) every block stays gathered from its forward to its
  // backward: all L of them at the head's backward, one fewer after each block's; the backward then
  // gathers (and prefetches, and stages) nothing.
  const bool keep = s3b && !in.zero.reshard_after_forward;
  // The head: its unit's fp32 gradient, its gathered copy and the blocks prefetched (16-bit compute
  // reads the 16-bit parameters directly: no working copy), beside every block's slice.
  const uint64_t head_ahead = keep ? 0 : s3b ? prefetched_blocks(in, u, s3h * ph, u.L) : 0;
  const uint64_t head_blocks = keep ? u.L : s3b * head_ahead;  // gathered at the head's backward
  const uint64_t head = 4 * ph + p * (s3h * ph + head_blocks * u.pb) + head_ahead * staged + u.L * slice;
  // The forward: bounded by the head's backward, but where the units stay gathered the blocks
  // prefetched ahead hold their staging beside all those already used.
  const uint64_t forward = keep ? keep_gathered_forward_bytes(in, u, p, staged_of) : 0;
  // With one rank nothing is reduced: each unit's gradient is added into the store at once.
  const bool per_unit = W > 1;  // a reduce-scatter launched as each unit's backward ends
  // The communicator's staging: one buffer, grown to the largest reduction issued, freed when the
  // last one issued is waited for. It grows as the micro-step's reductions are issued; the reducer
  // waits for the last reductions only after the last micro-step, so it stays at its largest through
  // the later ones.
  const uint64_t stg = staging_bytes(in, u);
  // The bytes each reduction in flight holds, oldest first. The reducer keeps N =
  // max_reductions_in_flight in flight, retiring the oldest when one more is launched, and waits for
  // the rest only after the last micro-step (zero/grad_reducer.h, complete_all): a later micro-step
  // begins with the last N reductions launched (the previous micro-step's, or with few blocks some of
  // the one before's too) in flight, through its forward and into its backward. From micro-step N + 1
  // on, every one repeats the one before.
  // The staging goes when the last reduction issued is waited for: at once where none stays in
  // flight (without overlap_comm, each is waited for as soon as it is launched).
  OpenReductions open(in);
  const uint64_t& open_bytes = open.bytes;
  const DType gdt = in.precision.grad_store_dtype(), rdt = in.precision.grad_reduce_dtype();
  uint64_t peak = 0;
  const int64_t steps = per_unit ? std::min<int64_t>(in.accum, in.zero.max_reductions_in_flight + 1) : 1;
  for (int64_t g = 0; g < steps; ++g) {
    // The buffers a unit's reduction holds (zero::micro_step_reduce_scatter_buffers).
    auto buffers_of = [&](uint64_t P, uint64_t S) {
      return zero::micro_step_reduce_scatter_buffers(P, S, g == 0, gdt, rdt);
    };
    // The staging, as large as the reductions issued: the previous micro-step's, while any is in flight.
    uint64_t issued_stg = g > 0 && !open.all_waited() ? stg : 0;
    // A unit's backward has ended: its gradient (P elements, shard S) is launched as one more
    // reduction beside `rest` (converted beside it first when reduced in 16 bits), the oldest
    // retired if that makes one too many.
    auto launch = [&](uint64_t rest, uint64_t P, uint64_t S) {
      const zero::ReductionBuffers b = buffers_of(P, S);
      const uint64_t before = issued_stg;
      issued_stg = std::max(issued_stg, scatter_staging_bytes(in, S));
      peak = std::max({peak, rest + b.converting + before, rest + b.held() + issued_stg});
      open.launch(b.held());
      if (open.all_waited()) issued_stg = 0;
    };
    // The forward holds the same reductions and staging beside at most the parameters the head's
    // backward holds (which adds its gradient): the head's backward bounds it.
    peak = std::max(peak, std::max(head, forward) + open_bytes + issued_stg);
    if (untied && per_unit)
      launch(open_bytes + p * u.pb * head_blocks + head_ahead * staged + u.L * slice, u.ph, u.sh);
    for (uint64_t j = 0; j < u.L; ++j) {  // the j-th block of the backward
      const uint64_t ahead = keep ? 0 : s3b ? prefetched_blocks(in, u, u.pb, u.L - 1 - j) : 0;
      // The blocks gathered beside this one: those prefetched ahead, or all still to come (keep).
      const uint64_t others = keep ? u.L - 1 - j : ahead;
      // The slices of the blocks whose backward is still to come (this block's went as it arrived).
      const uint64_t slices = (u.L - 1 - j) * slice;
      // While the block's backward runs: its gradient beside the reductions in flight.
      const uint64_t during =
          held + 4 * u.pb + open_bytes + issued_stg + s3b * p * u.pb * (1 + others) + ahead * staged + slices;
      peak = std::max(peak, during);
      if (per_unit) launch(held + open_bytes + s3b * p * u.pb * others + ahead * staged + slices, u.pb, u.sb);
    }
    // The embedding's backward (no parameters gathered): an untied unit 0's gradient opens now.
    if (untied) peak = std::max(peak, wg0 + open_bytes + issued_stg);
    if (per_unit) {
      // When it ends, unit 0's gradient is launched last, with the staging grown to the largest
      // reduction of the step.
      const zero::ReductionBuffers b = buffers_of(u.p0, u.s0);
      const uint64_t unit0_stg = open.all_waited() ? scatter_staging_bytes(in, u.s0) : stg;
      peak = std::max({peak, open_bytes + b.converting + issued_stg, open_bytes + b.held() + unit0_stg});
      open.launch(b.held());
    }
  }
  return peak;
}

// Peak of `gathered` + `comm` during a step at stages 0-1 (docs/planner.md). Only the last
// micro-step reduces, after nothing of the earlier ones is left in flight, so it bounds the step:
// it is followed as the engine's reducer runs it (zero/grad_reducer.h), each unit's gradient
// stored in backward order (the blocks from the last, then unit 0) and a reduction launched as
// soon as it can be: stage 0 a bucket's all-reduce once its last unit (its lowest) is stored, stage
// 1 each unit's reduce-scatter. A reduction in the stored gradient's dtype runs in place; in
// another, the reducer converts into buffers of the reduction dtype that the reduction holds until
// it is retired (stage 0: the bucket; stage 1: the unit and the shard to receive). N =
// max_reductions_in_flight stay in flight, one more's buffers allocated before the oldest is retired. The communicator's staging is
// grown (the old buffer freed first) when a reduction that needs more is issued, after its
// conversion buffers exist, and held until the last reduction issued is waited for: through the
// rest of the backward.
uint64_t transient_bytes_stages01(const PlanInput& in, const Units& u) {
  const uint64_t W = static_cast<uint64_t>(in.world);
  // A unit's fp32 gradient is a working buffer (`gathered`) unless the backward accumulates straight
  // into fp32 storage; it is freed once added into the store, before the unit's reduction is launched.
  const bool work_grad = !(in.precision.dtype == DType::kF32 || in.precision.accumulates_in_fp32());
  const uint64_t wg0 = work_grad ? 4 * u.p0 : 0;
  // A tied unit 0's stays open from the head's backward until the embedding's ends, beside every
  // other unit's; an untied one opens with the embedding's backward.
  const uint64_t held = u.head_unit() ? 0 : wg0;
  // The units as their gradients are stored: an untied head's, the blocks from the last, unit 0.
  const uint64_t units = u.L + 1 + (u.head_unit() ? 1 : 0);
  auto padded = [&](uint64_t k) { return k == 0 ? u.p0 : k <= u.L ? u.pb : u.ph; };
  auto shard = [&](uint64_t k) { return k == 0 ? u.s0 : k <= u.L ? u.sb : u.sh; };
  // While unit k's backward runs: its gradient beside the one held open.
  auto working = [&](uint64_t k) { return k == 0 ? wg0 : held + (work_grad ? 4 * padded(k) : 0); };
  // With one rank nothing is reduced: the largest of those is all there is.
  uint64_t peak = 0;
  for (uint64_t k = 0; k < units; ++k) peak = std::max(peak, working(k));
  if (W <= 1) return peak;
  const DType gdt = in.precision.grad_store_dtype(), rdt = in.precision.grad_reduce_dtype();
  // The staging goes when the last reduction issued is waited for: at once where none stays in flight
  // (without overlap_comm, each is waited for as soon as it is launched).
  OpenReductions open(in);
  uint64_t stg = 0;
  // `rest`: what else is live when the reduction is launched (the held gradient while others are).
  auto launch = [&](uint64_t rest, const zero::ReductionBuffers& b, uint64_t staging) {
    stg = std::max(stg, staging);
    peak = std::max(peak, rest + open.bytes + b.held() + stg);
    open.launch(b.held());
    if (open.all_waited()) stg = 0;
  };
  // Stage 0: each bucket's all-reduce is launched once its lowest unit is stored (zero/reduction_buckets.h).
  std::vector<uint64_t> closes(units, 0);  // elements of the bucket unit k closes, 0 if none
  if (in.zero.stage == 0) {
    std::vector<uint64_t> elements(units);
    for (uint64_t k = 0; k < units; ++k) elements[k] = padded(k);
    for (const auto& [lo, hi] : zero::reduction_buckets(elements, u64(in.zero.reduce_bucket_size)))
      for (int v = lo; v <= hi; ++v) closes[static_cast<size_t>(lo)] += elements[static_cast<size_t>(v)];
  }
  for (uint64_t k = units; k-- > 0;) {
    const uint64_t P = padded(k), S = shard(k);
    peak = std::max(peak, working(k) + open.bytes + stg);
    const uint64_t rest = k > 0 ? held : 0;
    if (in.zero.stage == 1) {
      launch(rest, zero::stored_unit_reduce_scatter_buffers(P, S, gdt, rdt), scatter_staging_bytes(in, S));
    } else if (const uint64_t bucket = closes[k]; bucket > 0) {
      launch(rest, zero::bucket_all_reduce_buffers(bucket, gdt, rdt),
             reduction_staging_bytes(true, bucket, rdt, W));
    }
  }
  return peak;
}

}  // namespace

void PlanInput::validate() const {
  ZDP_REQUIRE(model || params > 0, "give the model as --params N, a --preset, or --layers/--embd/--heads/--vocab");
  if (model) model->validate();
  ZDP_REQUIRE(world >= 1, "--gpus must be at least 1, got {}", world);
  ZDP_REQUIRE(micro_batch >= 1, "--micro-batch must be at least 1, got {}", micro_batch);
  ZDP_REQUIRE(accum >= 1, "--accum must be at least 1, got {}", accum);
  ZDP_REQUIRE(optimizer_states >= 0, "optimizer states per parameter must not be negative");
  if (model) {
    ZDP_REQUIRE(seq_len() >= 1 && seq_len() <= model->n_ctx(), "--seq {} must be in [1, n_ctx = {}]", seq_len(),
                model->n_ctx());
  }
  zero::check_zero_modes(zero, world);
  ZDP_REQUIRE(!precision.bf16_master_weights || (precision.dtype == DType::kBF16 && zero.offload_optimizer == Offload::kNone),
              "bf16 master weights need --dtype bf16 and no optimizer offload");
  ZDP_REQUIRE(!precision.bf16_optimizer_states || zero.offload_optimizer == Offload::kNone,
              "bf16 optimizer states with the optimizer offloaded are not supported: the offloaded update keeps fp32 "
              "states");
  ZDP_REQUIRE(!muon || model, "Muon's exchanges and working memory need a model (--preset or its dimensions), "
              "not a bare parameter count (--params)");
  ZDP_REQUIRE(ranks_per_host >= 0 && (ranks_per_host == 0 || world % ranks_per_host == 0),
              "--ranks-per-host {} must divide --gpus {}", ranks_per_host, world);
}



ParamCounts param_counts(const PlanInput& in) {
  const uint64_t W = static_cast<uint64_t>(in.world);
  ParamCounts c;
  if (!in.model) {
    c.numel = c.padded = in.params;
    c.shard = (in.params + W - 1) / W;
    c.units = 1;
    return c;
  }
  const Units u = units_of(*in.model, W);
  c.numel = u.n0 + u.L * u.nb + u.nh;
  c.padded = u.p0 + u.L * u.pb + u.ph;
  c.shard = u.s0 + u.L * u.sb + u.sh;
  c.units = 1 + u.L + (u.head_unit() ? 1 : 0);
  return c;
}

MemoryEstimate estimate_memory(const PlanInput& in) {
  in.validate();
  // Hybrid sharding: every rank holds what a rank of an N-rank run holds (the all-reduce across the
  // groups goes through the communicator's small staging: not modelled).
  if (is_hybrid(in)) return estimate_memory(as_group(in));
  const ParamCounts c = param_counts(in);
  const uint64_t p = dtype_size(in.precision.dtype), g = grad_bytes(in);
  const bool mixed = in.precision.fp32_masters();
  MemoryEstimate m;
  // docs/design.md's table.
  // Stage 3: the shards of the sharded units (sharded: elements), and the units kept whole in full.
  uint64_t whole = 0, sharded = c.shard;
  if (in.zero.stage == 3 && in.model) {
    const Units u = units_of(*in.model, static_cast<uint64_t>(in.world));
    const auto add = [&](uint64_t numel, uint64_t P, uint64_t S, uint64_t count) {
      if (!kept_whole(in, numel)) return;
      whole += count * P;
      sharded -= count * S;
    };
    u.each_kind(add);
  } else if (in.zero.stage == 3 && kept_whole(in, in.params)) {
    whole = c.padded;
    sharded = 0;
  }
  m.param = (in.zero.stage == 3 ? sharded + whole : c.padded) * p;
  m.grad = (in.zero.stage <= 1 ? c.padded : c.shard) * g;
  m.master = mixed ? (in.zero.stage == 0 ? c.padded : c.shard) * 4 : 0;
  m.optim = (in.zero.stage == 0 ? c.padded : c.shard) * dtype_size(in.precision.state_dtype()) *
            static_cast<uint64_t>(in.optimizer_states);

  // Optimizer offload, as zerodp's engine does it (zero/model_states.h): the fp32 master copy of the
  // shard (in fp32 runs too: the host's copy that the optimizer updates) and the optimizer states
  // leave the device; the host also stages one sub-group of the gradient in fp32 for the update to
  // read. The persistent gradients stay on the device (DeepSpeed moves its gradient partitions too).
  // On nvme (zero/optimizer_swap.h) they are in a file, and the host holds buffer_count slots of one
  // sub-group's masters and states (fewer when the shard has fewer sub-groups), the sub-group rounded
  // up to whole 4 KiB blocks.
  if (in.zero.offload_optimizer != Offload::kNone) {
    const bool nvme = in.zero.offload_optimizer == Offload::kNvme;
    MemoryEstimate::Offloaded& to = nvme ? m.nvme_by : m.host_by;
    to.master += c.shard * 4;
    to.optim += m.optim;
    const uint64_t sub = zero::offload_sub_group(u64(in.zero.sub_group_size), nvme);
    const uint64_t elems = std::min(sub, c.shard);
    // The gradient is staged in RAM whatever the tier.
    m.host_by.grad += zero::offload_grad_staging_buffers(c.shard, sub) * elems * 4;
    if (nvme) {
      const uint64_t slots = zero::offload_nvme_slots(u64(in.zero.optimizer_buffer_count), c.shard, sub);
      // Loading (and checkpoints) bring one unit's slot of the states in at a time, widened to whole
      // 4 KiB blocks (zero/model_states.h, StatesInHost), beside the slots: the largest such window.
      const uint64_t window = nvme_window_bytes(in);
      m.host_by.master += slots * elems * 4 + window;
      m.host_by.optim += (slots * elems * 4 + window) * static_cast<uint64_t>(in.optimizer_states);
    }
    m.master = m.optim = 0;
  }
  // Parameter offload (ZeRO-Infinity), as zerodp's engine does it: stage 3's parameter shards leave the
  // device (the units kept whole stay); the staging of each gather in flight is in `transient`.
  // On nvme (zero/param_swap.h) the shards of the units that fit in max_in_cpu elements (in unit
  // order, each that fits in what is left) stay in the host, the others go to the file, and the host
  // keeps buffer_count + 2 buffers of the largest shard in the file (those the gathers read into, two
  // the update writes through; not modelled for a bare count, which has no units: it is one unit).
  if (in.zero.offload_param == Offload::kCpu) m.host_by.param += sharded * p;
  if (in.zero.offload_param == Offload::kNvme) {
    std::vector<uint64_t> shards;  // elements
    if (in.model) {
      const Units u = units_of(*in.model, static_cast<uint64_t>(in.world));
      u.each_unit([&](uint64_t numel, uint64_t, uint64_t S) {
        if (!kept_whole(in, numel)) shards.push_back(S);
      });
    } else if (sharded > 0) {
      shards.push_back(sharded);
    }
    uint64_t left = u64(in.zero.param_max_in_cpu), in_file = 0, largest = 0;
    for (uint64_t n : shards) {
      if (n <= left) {
        left -= n;
        m.host_by.param += n * p;
      } else {
        in_file += n * p;
        largest = std::max(largest, n);
      }
    }
    m.nvme_by.param += in_file;
    if (in.model && in_file > 0)
      m.host_by.param += zero::param_swap_host_bytes(static_cast<int>(in.zero.param_buffer_count), largest * p);
  }
  if (in.zero.offload_param != Offload::kNone) m.param = whole * p;
  complete_offloaded_tiers(in, c, m);  // --async-save's host copy, the tiers' totals

  uint64_t act_live = 0, chunk = 0, update_act = 0, update_comm = 0;
  if (in.model) {
    const Units u = units_of(*in.model, static_cast<uint64_t>(in.world));
    const int64_t T = in.seq_len();
    act_live =
        activation_bytes(*in.model, in.micro_batch, T, zero::activation_settings(in.zero), in.precision.dtype, in.gpu)
            .total();
    // The engine's tokens (on a GPU in host memory), or cuBLASLt's workspace (the GPU's, for its life).
    act_live += in.gpu ? kGpuGemmWorkspaceBytes
                       : zero::batch_token_bytes(static_cast<uint64_t>(in.micro_batch), static_cast<uint64_t>(T));
    // Loading (and widening 16-bit gradients) goes through a chunk of at most zero::kWorkChunk fp32 values,
    // no larger than the largest range the rank reads: whole units at stage 0, its own range of each
    // unit at stages 1-3 (the rest of the units it keeps whole is gathered).
    const uint64_t kept = in.zero.stage >= 1
                              ? std::max({std::min(u.s0, u.n0), std::min(u.sb, u.nb), std::min(u.sh, u.nh)})
                              : std::max({u.n0, u.nb, u.nh});
    chunk = 4 * std::min<uint64_t>(zero::kWorkChunk, kept);
    m.transient = in.zero.stage <= 1 ? transient_bytes_stages01(in, u) : transient_bytes_stages23(in, u);
    // The update (zero/shard_optimizer.cpp) widens, a chunk at a time (zero::kDeviceWorkChunk elements on a
    // GPU), 16-bit gradients and each bf16 optimizer state into fp32 chunks that live through it.
    const bool widens = in.precision.dtype != DType::kF32 && !in.precision.accumulates_in_fp32();
    const uint64_t planes = (widens ? 1 : 0) + (in.precision.bf16_optimizer_states ? u64(in.optimizer_states) : 0) +
                            (in.precision.bf16_master_weights ? 1 : 0);
    update_act = planes * 4 * std::min<uint64_t>(in.gpu ? zero::kDeviceWorkChunk : zero::kWorkChunk, kept);
    // Muon's (zero/muon_step.h): the unit buffer and the Newton-Schulz scratch (act) through the whole
    // update too, and the largest unit's reduction staging (comm) beside them.
    if (in.muon) {
      const zero::MuonWork work = zero::muon_work(model::ParamLayout(*in.model), in.world);
      const bool whole = in.zero.stage == 0;
      const size_t count = whole ? work.unit : work.unit / static_cast<size_t>(in.world);
      update_act += work.bytes();
      update_comm = comm::ordered_reduction_staging_bytes_for(whole, count, DType::kF32, in.world);
    }
  }
  m.act = act_live + std::max(chunk, update_act);
  m.total = m.param + m.grad + m.master + m.optim + act_live +
            std::max({chunk, m.transient, update_act + update_comm});
  return m;
}


}  // namespace zerodp::plan
