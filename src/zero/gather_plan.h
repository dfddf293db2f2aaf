// Stage 3's gathers over one micro-step, derived from the model's schedule alone (model/units.h), so
// that the engine and the planner (plan/estimator.h) follow the same rule.
//
// A unit's gathered parameters are freed after its last read of the micro-step, and after a forward
// use too unless reshard_after_forward is off; never when its next use follows at once (the head's
// forward before its backward). A read of a freed unit gathers it again. With ZeRO++'s hpZ (a secondary partition
// of P ranks), the first gather of a unit that will be gathered again keeps the rank's 1/P slice of
// it (the secondary), every later gather all-gathers the slices within the P ranks instead of over
// all ranks, and the last one drops the slice: GPT-2's tied unit 0 is gathered for the embedding's
// forward, and for the head's forward from its slices; a block for its forward, and for its backward
// from its slices; an untied head, which stays gathered from its forward through its backward, keeps
// no slice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/units.h"
#include "zero/settings.h"

namespace zerodp::zero {

class GatherPlan {
 public:
  enum class Source : uint8_t {
    kNone,        // the unit is still gathered: no collective
    kFull,        // gathered over all ranks (quantized with qwZ)
    kFullKeep,    // over all ranks, and the rank's slice kept for a later gather (hpZ)
    kSlices,      // from the secondary slices, within the P ranks; the slice stays for a later one
    kSlicesLast,  // from the secondary slices, the unit's last gather: the slice goes after it
  };

  GatherPlan() = default;
  GatherPlan(const model::UnitSchedule& schedule, bool reshard_after_forward, bool secondary_partition);

  // After use k, the unit's gathered parameters are freed.
  bool frees_after(int use) const { return frees_.at(static_cast<size_t>(use)); }
  // How read r of schedule.param_reads() gets its unit's parameters.
  Source source(size_t read) const { return source_.at(read); }
  static bool gathers(Source s) { return s != Source::kNone; }
  static bool from_slices(Source s) { return s == Source::kSlices || s == Source::kSlicesLast; }
  // The gather leaves a slice behind (kept, or still needed).
  static bool slice_after(Source s) { return s == Source::kFullKeep || s == Source::kSlices; }

 private:
  std::vector<bool> frees_;
  std::vector<Source> source_;
};

// Whether stage 3 prefetches at all: only with overlap_comm (without it every gather is waited for
// at its read, and nothing is started ahead).
inline bool prefetches(const ZeroSettings& zero) { return zero.overlap_comm; }

// Stage 3's prefetch (with overlap_comm), after the read at `cursor` of a schedule's parameter reads
// (reads[0, end)): the units of the next kPrefetchReads reads that are still sharded (sharded(v)) are
// started in read order, start(v, k) for read k, while each fits: what is live (gathered or in flight:
// `live` elements, which start() adds to) within max_live and what this call starts within bucket
// (stage3_max_live_parameters, stage3_prefetch_bucket_size; units of elems(v) elements). The first
// that does not fit, or that may_start(v) refuses, ends it. The engine (ParamGatherer) runs it on its
// units; the planner replays it.
inline constexpr size_t kPrefetchReads = 4;
template <class Reads, class Live, class Sharded, class Elems, class MayStart, class Start>
void prefetch_after(size_t cursor, size_t end, const Reads& reads, const Live& live, uint64_t max_live,
                    uint64_t bucket, Sharded&& sharded, Elems&& elems, MayStart&& may_start, Start&& start) {
  uint64_t ahead = 0;
  for (size_t k = cursor + 1; k < end && k <= cursor + kPrefetchReads; ++k) {
    const auto v = reads[k];
    if (!sharded(v)) continue;
    if (!may_start(v)) break;
    const uint64_t n = elems(v);
    if (live + n > max_live || ahead + n > bucket) break;
    start(v, k);
    ahead += n;
  }
}

}  // namespace zerodp::zero
