// Gradient reduction: every rank's gradient summed in the reduction dtype, in rank order
// (comm/communicator.h), and left where the stage keeps it.
//
//   stage 0: the whole gradient all-reduced, in buckets of units (reduce_bucket_size elements),
//            each launched as soon as the backward has finished all its units;
//   stage 1: each unit's gradient reduce-scattered in place into the rank's range of it;
//   stages 2-3: each micro-step's fp32 unit gradient reduce-scattered, the rank's shard of the sum
//            added into its persistent gradient shard (the first micro-step's received straight
//            into it when the dtypes agree: no receive buffer, no pass adding it to zeros).
//
// Stages 0-1 reduce once per optimizer step (after the last micro-step), stages 2-3 every
// micro-step. With hybrid sharding (`replicas`: the ranks holding the same shard in the other
// groups) the reductions above run within the rank's group, and complete_all() then sums the rank's
// shard of the gradient across the groups, unit by unit: the group's sums added in group order. The
// buffers each reduction holds and how many stay in flight while the backward goes on are
// zero/reduction_plan.h's rules.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
#include "zero/comm_clock.h"
#include "zero/engine_config.h"
#include "zero/model_states.h"
#include "zero/reduction_buckets.h"
#include "zero/reduction_plan.h"

namespace zerodp::zero {

class GradReducer {
 public:
  // comm: the rank's shard group; replicas: null without hybrid sharding.
  GradReducer(ModelStates& states, comm::Communicator& comm, comm::Communicator* replicas, const EngineConfig& config,
              CommClock& clock);

  // Before each micro-step of an optimizer step: stages 0-1 reduce after the last one only; stages
  // 2-3 write the first one's sum into the gradient shard (nothing zeroes it) and add the others'.
  void begin_micro_step(bool first, bool last);
  // Whether the micro-step running is the step's first (whose sums are written, not added).
  bool first_micro_step() const { return first_micro_; }
  // Stages 0-1: unit u's gradient of this micro-step is in the persistent store.
  void unit_stored(int u);
  // Stages 2-3: reduces unit u's fp32 gradient of this micro-step (`grad`, padded to P elements,
  // taken) into the rank's shard of the persistent gradient.
  void reduce_to_shard(int u, Buffer grad);
  // Waits for every reduction in flight and lands it (after the last micro-step: across the groups too).
  void complete_all();

  bool in_flight() const { return !pending_.empty(); }
  // Moves the buffers of reductions in flight into `keep` (the engine parks them when it fails).
  void park(std::vector<Buffer>& keep);

 private:
  // A reduction in flight, with the buffers it uses and what to do when it lands.
  struct Pending {
    comm::WorkPtr work;
    Buffer send, recv;  // owned temporaries (may be empty)
    std::function<void()> on_done;
  };

  void plan_buckets();
  void launch_bucket(int b);
  void launch_reduce_scatter_in_place(int u);
  void push(Pending p);
  void complete(Pending& p);
  void reduce_across_groups();

  ModelStates& states_;
  comm::Communicator& comm_;
  comm::Communicator* replicas_;
  const EngineConfig cfg_;  // a copy: the part may outlive the caller's config
  CommClock& clock_;
  const DType rdt_;  // the reduction dtype
  bool first_micro_ = true, last_micro_ = false;
  InFlightWindow<Pending> pending_;
  // Stage 0 buckets: contiguous unit ranges [lo, hi] in backward order.
  std::vector<std::pair<int, int>> buckets_;
  std::vector<int> unit_bucket_, bucket_left_;
};

}  // namespace zerodp::zero
