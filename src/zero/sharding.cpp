#include "zero/sharding.h"

#include "core/error.h"

namespace zerodp::zero {

ShardLayout::ShardLayout(const model::ParamLayout& layout, int world, int rank) : world_(world), rank_(rank) {
  ZDP_CHECK(world > 0 && rank >= 0 && rank < world, "bad rank {} of {}", rank, world);
  for (int u = 0; u < layout.num_units(); ++u) {
    UnitShard s;
    s.numel = layout.unit_numel(u);
    s.shard = shard_elements(s.numel, static_cast<size_t>(world));
    s.padded = s.shard * world;
    s.offset = total_padded_;
    s.own_begin = std::min(s.numel, s.shard * rank);
    s.own_end = std::min(s.numel, s.shard * (rank + 1));
    total_padded_ += s.padded;
    total_shard_ += s.shard;
    units_.push_back(s);
  }
}

std::vector<Segment> unit_segments(const model::ParamLayout& layout, int unit, size_t begin, size_t end) {
  std::vector<Segment> out;
  for (const model::ParamInfo* p : layout.unit_params(unit)) {
    const size_t b = std::max(begin, p->offset), e = std::min(end, p->offset + p->numel);
    if (b < e) out.push_back({b, e - b, p->decay, p});
  }
  return out;
}

}  // namespace zerodp::zero
