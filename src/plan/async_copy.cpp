#include "plan/async_copy.h"

#include "zero/state_copy.h"

namespace zerodp::plan {

void complete_offloaded_tiers(const PlanInput& in, const ParamCounts& counts, MemoryEstimate& m) {
  if (in.async_save) {
    const zero::StateCopyBytes copy = zero::state_copy_bytes(counts.shard, counts.units, in.optimizer_states);
    m.host_by.master += copy.master;
    m.host_by.optim += copy.optim;
  }
  m.host = m.host_by.total();
  m.nvme = m.nvme_by.total();
}

}  // namespace zerodp::plan
