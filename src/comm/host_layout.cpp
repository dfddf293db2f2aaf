#include "comm/host_layout.h"

#include <algorithm>
#include <climits>
#include <map>

#include "core/error.h"
#include "core/quantize.h"

namespace zerodp::comm {

HostLayout HostLayout::from_hosts(const std::vector<int>& host_of) {
  HostLayout l;
  std::map<int, int> number;  // a host's id → its index, in the order of first appearance
  l.host_of.reserve(host_of.size());
  for (const int id : host_of) {
    const auto [it, fresh] = number.emplace(id, static_cast<int>(number.size()));
    l.host_of.push_back(it->second);
  }
  l.hosts = std::max<int>(1, static_cast<int>(number.size()));
  const int W = static_cast<int>(host_of.size());
  if (W == 0 || W % l.hosts != 0) return l;
  const int per_host = W / l.hosts;
  for (int r = 0; r < W; ++r)
    if (l.host_of[static_cast<size_t>(r)] != r / per_host) return l;
  l.ranks_per_host = per_host;
  return l;
}

bool runs_in_two_levels(const HostLayout& layout, CollectiveKind kind, bool is_sum, size_t count) {
  if (!layout.two_level || count == 0) return false;
  if (kind == CollectiveKind::kReduceScatter) return is_sum;
  if (kind == CollectiveKind::kAllGather)
    return static_cast<uint64_t>(layout.ranks_per_host) * count <= static_cast<uint64_t>(INT_MAX);
  return false;
}

uint64_t quantized_chunk_bytes(size_t count) {
  uint64_t bytes = 0;
  for (size_t k = 0; k < count; k += kTwoLevelPieceElements)
    bytes += quantized_int8_bytes(std::min(kTwoLevelPieceElements, count - k));
  return bytes;
}

TwoLevelStaging two_level_staging(size_t count, DType dtype, int ranks_per_host, bool quantized) {
  const auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  const size_t piece = std::min(count, kTwoLevelPieceElements), es = dtype_size(dtype);
  TwoLevelStaging s;
  size_t at = aligned(static_cast<size_t>(std::max(0, ranks_per_host - 1)) * piece * es);
  for (size_t& p : s.partial) at = aligned((p = at) + piece * sizeof(float));
  for (size_t& f : s.finished) at = aligned((f = at) + piece * es);
  if (quantized) {
    const size_t qpiece = quantized_int8_bytes(piece);
    for (size_t& o : s.outgoing) at = aligned((o = at) + qpiece);
    at = aligned((s.incoming = at) + qpiece);
    at = aligned((s.own = at) + static_cast<size_t>(quantized_chunk_bytes(count)));
  }
  s.total = at;
  return s;
}

uint64_t bytes_across_hosts(const HostLayout& layout, CollectiveKind kind, size_t count, size_t elem_bytes, int rank,
                            bool two_level, bool quantized) {
  if (!layout.spans_hosts() || count == 0) return 0;
  const int W = static_cast<int>(layout.host_of.size());
  ZDP_CHECK(rank >= 0 && rank < W, "rank {} outside a layout of {} ranks", rank, W);
  const uint64_t H = static_cast<uint64_t>(layout.hosts), chunk = static_cast<uint64_t>(count) * elem_bytes;
  if (two_level) {
    ZDP_CHECK(layout.two_level, "a two-level count asked of a layout that does not run two levels");
    const bool last_host = layout.host_of[static_cast<size_t>(rank)] == layout.hosts - 1;
    if (kind == CollectiveKind::kReduceScatter && quantized)
      return (last_host ? H - 1 : H) * quantized_chunk_bytes(count);
    if (kind == CollectiveKind::kReduceScatter && !last_host) return 4 * H * static_cast<uint64_t>(count);
    return (H - 1) * chunk;
  }
  const int successor = (rank + 1) % W;
  if (layout.host_of[static_cast<size_t>(successor)] == layout.host_of[static_cast<size_t>(rank)]) return 0;
  return ring_bytes_sent(kind, ledger_full_bytes(kind, count, elem_bytes, W), W);
}

}  // namespace zerodp::comm
