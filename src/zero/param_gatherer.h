// Parameter gathering.
//
//   stage 3: a sharded unit is all-gathered just before it is used (forward, then backward) and
//            freed after; the next units of the micro-step's schedule of uses are prefetched
//            within stage3_max_live_parameters (gathered at once) and stage3_prefetch_bucket_size
//            (fetched ahead). Units kept whole (stage3_param_persistence_threshold) are never
//            gathered. With parameter offload the unit's shard is in host memory: start() copies
//            it up into a device staging buffer (category comm) and gathers from there, so a
//            prefetched gather holds one staging shard until it is waited for (ensure or release).
//            On NVMe, start() only starts reading the shard (kReading); the reads are turned into
//            gathers, in the order they were started, at the next use() (or an ensure() that needs
//            one): a deterministic point, so every rank issues its collectives in the same order,
//            and the read overlaps the compute of the unit in between.
//   stages 1-2 (and stage 3's whole units): after the optimizer updated the rank's shard, every
//            whole unit is all-gathered in place, at most allgather_bucket_size elements in flight.
// Every gather runs over the rank's shard group (all ranks, or its group with hybrid sharding).
// ZeRO++ (stage 3, zero/settings.h): with zero_quantized_weights (qwZ) a gather moves each rank's shard
// as int8 blocks with fp32 scales (quantized into a comm buffer, gathered as bytes, every rank's part
// dequantized into the unit once it has arrived), so that every rank computes with the same
// dequantized weights. With zero_hpz_partition_size P > 1 (hpZ), the first gather of a unit that the
// micro-step gathers again keeps the rank's 1/P slice of its (dequantized) parameters as a secondary
// shard (category gathered), and the later gathers all-gather those slices within the group of P
// consecutive ranks (a host) instead of over all ranks: the same parameters as the first gather's. The
// slice goes after the unit's last gather (zero/gather_plan.h says which gathers those are).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
#include "model/units.h"
#include "zero/comm_clock.h"
#include "zero/engine_config.h"
#include "zero/gather_plan.h"
#include "zero/model_states.h"

namespace zerodp::zero {

class ParamGatherer {
 public:
  ParamGatherer(ModelStates& states, comm::Communicator& comm, const EngineConfig& config, CommClock& clock);

  // Stage 3: use k of the model's schedule, one that reads its unit's parameters, is about to run:
  // gathers the unit (if it is not yet) and prefetches the next units the schedule reads.
  void use(int k);
  // Unit u's full parameters in the compute dtype: the store (whole units) or its gathered copy.
  const void* params(int u);
  // Stage 3: frees unit u's gathered copy; false when there was none (whole, or not gathered).
  bool release(int u);
  // Stage 3: whether use k ends with its unit's gathered copy freed (zero/gather_plan.h).
  bool frees_after(int k) const { return plan_.frees_after(k); }
  // Stages 1-3: re-assembles the whole units from every rank's updated shard.
  void gather_after_update();
  // Stage 3: the elements gathered or in flight now (0 once every unit has been freed).
  size_t live_elements() const { return live_; }

  // Forward passes only (evaluation): prefetch no further than the head's forward, since no backward
  // follows; the caller releases every unit after each pass.
  void set_forward_only(bool on) { forward_only_ = on; }

  bool in_flight() const;
  void park(std::vector<Buffer>& keep);

 private:
  enum class State : uint8_t { kSharded, kReading, kInFlight, kReady };
  // `read`: the index in schedule_.param_reads() the gather is for (forward or backward).
  void start(int u, size_t read);
  void finish_gather(int u);  // after the collective: dequantize (qwZ), keep or drop the secondary (hpZ)
  GatherPlan::Source source_of(int u) const;  // of the gather in flight for u
  void drop_quantized(int u);
  void launch_reads();  // NVMe: every read started, in order, copied up and its gather launched
  void ensure(int u);
  void prefetch();

  ModelStates& states_;
  comm::Communicator& comm_;
  const EngineConfig cfg_;  // a copy: the part may outlive the caller's config
  CommClock& clock_;
  std::vector<Buffer> gathered_;  // the unit's full parameters, compute dtype
  std::vector<Buffer> staging_;   // parameter offload: the shard on the device while its gather is in flight
  std::vector<State> state_;
  std::vector<int> read_slot_;  // NVMe: the ParamSwap read buffer of a unit in kReading
  std::deque<int> reading_;     // NVMe: units in kReading, in the order their reads started
  std::vector<comm::WorkPtr> work_;
  std::vector<size_t> started_for_;  // the read a unit's gather in flight is for
  // qwZ: a unit's quantized shard and every rank's quantized shard, while its gather is in flight (comm).
  std::vector<Buffer> quantized_shard_, quantized_all_;
  // hpZ: the groups of P consecutive ranks and each unit's secondary slice.
  int hpz_ = 1;
  std::unique_ptr<comm::Communicator> secondary_group_;
  std::vector<Buffer> secondary_;
  const model::UnitSchedule& schedule_;  // the model's (the layout's): which units it reads in what order
  GatherPlan plan_;  // which reads gather, from where
  size_t live_ = 0;  // elements gathered or in flight
  size_t cursor_ = 0;  // the current use's place in schedule_.param_reads()
  bool forward_only_ = false;
};

}  // namespace zerodp::zero
