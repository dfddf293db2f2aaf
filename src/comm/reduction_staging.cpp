#include "comm/reduction_staging.h"

#include <algorithm>
#include <cstdint>

namespace zerodp::comm {

namespace {
// An all-reduce of at most this many bytes in all (W·count·size) is one all-gather (small_all_reduce).
constexpr uint64_t kSmallAllReduceBytes = 256 * 1024;
}  // namespace

bool is_small_all_reduce(size_t count, DType dtype, int group_size) {
  return static_cast<uint64_t>(group_size) * count * dtype_size(dtype) <= kSmallAllReduceBytes;
}

size_t ordered_reduction_piece_elements(int group_size) {
  // About 1 MiB of fp32 staging whatever the group size, and never pieces so small that the
  // per-message cost dominates.
  return std::max<size_t>(size_t{1} << 12, (size_t{1} << 18) / static_cast<size_t>(std::max(1, group_size)));
}

size_t ordered_reduction_staging_bytes(size_t chunk_elements, DType dtype, int group_size) {
  const size_t piece = std::min(chunk_elements, ordered_reduction_piece_elements(group_size));
  return piece * sizeof(float) + static_cast<size_t>(group_size) * piece * dtype_size(dtype);
}

size_t ordered_reduction_staging_bytes_for(bool all_reduce, size_t count, DType dtype, int group_size) {
  if (group_size <= 1 || count == 0) return 0;
  const auto W = static_cast<size_t>(group_size);
  if (!all_reduce) return ordered_reduction_staging_bytes(count, dtype, group_size);  // chunks of count
  if (is_small_all_reduce(count, dtype, group_size))
    return ordered_reduction_staging_bytes(count, dtype, group_size);  // everyone's whole buffer
  return ordered_reduction_staging_bytes((count + W - 1) / W, dtype, group_size);  // the longest chunk
}

}  // namespace zerodp::comm
