// The planner's host and nvme tiers completed (MemoryEstimate::host_by, nvme_by, host, nvme): the
// host copy of an asynchronous checkpoint (PlanInput::async_save), by zero/state_copy.h's rule, the
// engine's own, then each tier's total. Its own room so that the estimator does not grow.
#pragma once

#include <cstdint>

#include "plan/estimator.h"

namespace zerodp::plan {

// `counts`: Σ S over the units, one rank's shards, and the number of units (ParamCounts) of the
// sharding the checkpoint's files follow. With in.async_save the copy's fp32 weights are added to host_by.master and
// its optimizer states to host_by.optim (the ledger's categories for them); then host and nvme are set
// to their tiers' totals. The copy is the first shard group's (hybrid sharding: the ranks that write
// the files); the other groups' ranks hold none.
void complete_offloaded_tiers(const PlanInput& in, const ParamCounts& counts, MemoryEstimate& m);

}  // namespace zerodp::plan
