#include "zero/gather_plan.h"

#include <algorithm>

namespace zerodp::zero {

GatherPlan::GatherPlan(const model::UnitSchedule& schedule, bool reshard_after_forward, bool secondary_partition) {
  const int n = schedule.size();
  frees_.assign(static_cast<size_t>(n), false);
  source_.assign(schedule.param_reads().size(), Source::kNone);
  int units = 0;
  for (const model::UnitUse& use : schedule.uses()) units = std::max(units, use.unit + 1);
  std::vector<bool> gathered(static_cast<size_t>(units), false);
  std::vector<std::vector<size_t>> gathers(static_cast<size_t>(units));  // the reads that gather each unit
  for (int k = 0; k < n; ++k) {
    const model::UnitUse& use = schedule[k];
    const auto u = static_cast<size_t>(use.unit);
    if (use.reads_params && !gathered[u]) {
      gathers[u].push_back(static_cast<size_t>(schedule.param_read_index(k)));
      gathered[u] = true;
    }
    const bool last_read = use.reads_params && schedule.last_param_read(k);
    const bool frees = use.pass == model::Pass::kForward
                           ? (reshard_after_forward || last_read) && !schedule.next_use_follows(k)
                           : last_read;
    frees_[static_cast<size_t>(k)] = frees;
    if (frees) gathered[u] = false;
  }
  for (const std::vector<size_t>& reads : gathers) {
    for (size_t j = 0; j < reads.size(); ++j) {
      const bool again = j + 1 < reads.size();
      if (!secondary_partition) {
        source_[reads[j]] = Source::kFull;
      } else if (j == 0) {
        source_[reads[j]] = again ? Source::kFullKeep : Source::kFull;
      } else {
        source_[reads[j]] = again ? Source::kSlices : Source::kSlicesLast;
      }
    }
  }
}

}  // namespace zerodp::zero
