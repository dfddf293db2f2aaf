// How a unit's flat buffer is cut into W shards. The unit's n elements are padded with zeros to
// P = W·S, where the shard size S is n/W rounded up to a multiple of kShardAlign elements (so every
// shard starts 64-byte aligned in fp32); rank r owns [r·S, (r+1)·S).
//
//   unit u:  | rank 0: S | rank 1: S | ... | rank W-1: S |      P = W·S >= n
//            |<-------------- n real elements ------->|pad|
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "model/layout.h"

namespace zerodp::zero {

constexpr size_t kShardAlign = 16;
// S for a unit of n elements over W ranks: ⌈n/W⌉ rounded up to kShardAlign (the planner's too).
constexpr size_t shard_elements(size_t n, size_t world) {
  return ((n + world - 1) / world + kShardAlign - 1) / kShardAlign * kShardAlign;
}

struct UnitShard {
  size_t numel = 0;        // n: real elements
  size_t padded = 0;       // P = W·S
  size_t shard = 0;        // S
  size_t offset = 0;       // first element of this unit in the all-units flat buffers (sum of earlier P)
  // The rank's shard as a range of the unit's real elements: [begin, end) clipped to n.
  size_t own_begin = 0, own_end = 0;
};

class ShardLayout {
 public:
  ShardLayout(const model::ParamLayout& layout, int world, int rank);
  int world() const { return world_; }
  int rank() const { return rank_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const UnitShard& unit(int u) const { return units_.at(static_cast<size_t>(u)); }
  // Ψ: the padded element count of all units together.
  size_t total_padded() const { return total_padded_; }
  // Σ S over units: what one rank's shards hold.
  size_t total_shard() const { return total_shard_; }

 private:
  int world_, rank_;
  std::vector<UnitShard> units_;
  size_t total_padded_ = 0, total_shard_ = 0;
};

// Segments of [begin, end) of unit u's elements, one per tensor it crosses, with that tensor's
// weight-decay flag (for AdamW on a shard) and the tensor itself.
struct Segment {
  size_t begin, count;
  bool decay;
  const model::ParamInfo* tensor = nullptr;
};
std::vector<Segment> unit_segments(const model::ParamLayout& layout, int unit, size_t begin, size_t end);

}  // namespace zerodp::zero
