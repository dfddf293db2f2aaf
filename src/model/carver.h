// How a model lays its activation arrays over one allocation: Carver hands out consecutive slices,
// each starting on a multiple of `align` bytes; with a null base it only counts, so the same code
// sizes the allocation (and the planner's activation bytes) and then carves it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.h"

namespace zerodp::model {

struct Carver {
  // The parts of a model's activations (ActivationBytes, model/model.h) a slice counts towards.
  enum Part : uint8_t { kHead, kBlockOutputs, kBlockSets, kBackward, kParts };

  char* base = nullptr;
  size_t used = 0;
  size_t align = 1;
  Part part = kHead;           // what take() hands out next counts towards
  size_t parts[kParts] = {};   // bytes by part: each slice with the padding after it
  Part last_part = kHead;      // the part of the last slice, which the next one's padding joins

  template <class T>
  T* take(size_t n) {
    const size_t start = (used + align - 1) / align * align;
    parts[last_part] += start - used;
    T* p = base ? reinterpret_cast<T*>(base + start) : nullptr;
    used = start + n * sizeof(T);
    parts[part] += n * sizeof(T);
    last_part = part;
    return p;
  }

  // A decoder's residual stream: `n` Acc values entering each of L blocks and leaving the last (res[0],
  // the embeddings, counts as the head's; the others as the blocks' outputs); then `sets` sized for the
  // blocks' saved arrays, one set a block or, with checkpointing, one that every block recomputes into,
  // which the caller lays out next (they count as kBlockSets).
  template <class Acc, class Set>
  void take_blocks(std::vector<Acc*>& res, std::vector<Set>& sets, int L, bool checkpointing, size_t n) {
    res.assign(static_cast<size_t>(L) + 1, nullptr);
    for (Acc*& r : res) {
      r = take<Acc>(n);
      part = kBlockOutputs;
    }
    sets.assign(checkpointing ? 1 : static_cast<size_t>(L), Set{});
    part = kBlockSets;
  }
};

// Whether a model computing on T computes in 16 bits (its arrays then start on 64-byte boundaries).
template <class T>
inline constexpr bool kIs16 = std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

}  // namespace zerodp::model
