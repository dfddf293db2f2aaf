// How a model lays its activation arrays over one allocation: Carver hands out consecutive slices,
// each starting on a multiple of `align` bytes; with a null base it only counts, so the same code
// sizes the allocation (and the planner's activation bytes) and then carves it.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/dtype.h"

namespace zerodp::model {

struct Carver {
  char* base = nullptr;
  size_t used = 0;
  size_t align = 1;
  template <class T>
  T* take(size_t n) {
    used = (used + align - 1) / align * align;
    T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += n * sizeof(T);
    return p;
  }
};

// Whether a model computing on T computes in 16 bits (its arrays then start on 64-byte boundaries).
template <class T>
inline constexpr bool kIs16 = std::is_same_v<T, bf16> || std::is_same_v<T, fp16>;

}  // namespace zerodp::model
