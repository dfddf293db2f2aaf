// A piece of a flat parameter buffer that an optimizer updates in one go.
//
// The ZeRO engine keeps every parameter in one flat buffer and gives each rank a contiguous shard of
// it; a shard cuts across tensors, so it is described as a list of segments, one per
// (tensor ∩ shard), each saying whether weight decay applies there (tensors with two or more
// dimensions: docs/reference/optimizer.md#decay).
#pragma once

#include <cstddef>
#include <span>

namespace zerodp::optim {

struct ParamSegment {
  size_t offset = 0;   // first element, relative to the arrays handed to the update
  size_t count = 0;    // number of elements
  bool decay = false;  // apply weight decay to these elements
};

// The number of elements the segments cover together.
inline size_t total_count(std::span<const ParamSegment> segments) {
  size_t n = 0;
  for (const ParamSegment& s : segments) n += s.count;
  return n;
}

}  // namespace zerodp::optim
