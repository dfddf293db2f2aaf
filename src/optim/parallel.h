// Internal to optim/: splitting an elementwise update over OpenMP threads.
//
// Every optimizer here is elementwise, so any split gives the same bits; the split only has to keep
// threads on disjoint cache lines (chunks are multiples of 16 floats) and stay serial when the work
// is too small to pay for waking the thread pool, or when the caller is already inside a parallel
// region.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include <omp.h>

#include "optim/segment.h"

namespace zerodp::optim::detail {

// Below this many elements a single thread is faster than a parallel region.
constexpr size_t kMinParallelElements = size_t{1} << 15;
// Chunk boundaries fall on multiples of this many elements (64 bytes of fp32).
constexpr size_t kChunkAlign = 16;

inline int threads_for(size_t n) {
  if (n < kMinParallelElements || omp_in_parallel()) return 1;
  const size_t most = std::max<size_t>(1, n / (kMinParallelElements / 2));
  return static_cast<int>(std::min<size_t>(static_cast<size_t>(omp_get_max_threads()), most));
}

// The part [begin, end) of [0, n) that thread `tid` of `nthreads` takes.
inline void thread_range(size_t n, int tid, int nthreads, size_t* begin, size_t* end) {
  const size_t chunks = (n + kChunkAlign - 1) / kChunkAlign;
  const size_t per = chunks / static_cast<size_t>(nthreads);
  const size_t extra = chunks % static_cast<size_t>(nthreads);
  const size_t t = static_cast<size_t>(tid);
  const size_t first = t * per + std::min(t, extra);
  const size_t last = first + per + (t < extra ? 1 : 0);
  *begin = std::min(n, first * kChunkAlign);
  *end = std::min(n, last * kChunkAlign);
}

// Calls fn(begin, end) on disjoint ranges covering [0, n), in parallel when n is large.
template <typename Fn>
void parallel_ranges(size_t n, Fn&& fn) {
  const int nthreads = threads_for(n);
  if (nthreads <= 1) {
    if (n > 0) fn(size_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(nthreads)
  {
    size_t begin, end;
    thread_range(n, omp_get_thread_num(), omp_get_num_threads(), &begin, &end);
    if (begin < end) fn(begin, end);
  }
}

// Calls fn(segment, begin, end) for pieces [begin, end) of each segment (element indices relative to
// segment.offset), covering every segment exactly once. The segments are laid end to end and that
// concatenation is split between the threads, so one parallel region serves the whole list however
// many small segments it has.
template <typename Fn>
void parallel_segments(std::span<const ParamSegment> segments, Fn&& fn) {
  const size_t n = total_count(segments);
  const int nthreads = threads_for(n);
  if (nthreads <= 1) {
    for (const ParamSegment& s : segments)
      if (s.count > 0) fn(s, size_t{0}, s.count);
    return;
  }
#pragma omp parallel num_threads(nthreads)
  {
    size_t lo, hi;
    thread_range(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
    size_t seg_start = 0;  // position of the current segment in the concatenation
    for (const ParamSegment& s : segments) {
      if (seg_start >= hi) break;
      const size_t seg_end = seg_start + s.count;
      if (seg_end > lo) {
        const size_t b = std::max(lo, seg_start) - seg_start;
        const size_t e = std::min(hi, seg_end) - seg_start;
        if (b < e) fn(s, b, e);
      }
      seg_start = seg_end;
    }
  }
}

}  // namespace zerodp::optim::detail
