#include "comm/traffic.h"

#include "core/error.h"

namespace zerodp::comm {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kBroadcast: return "broadcast";
  }
  return "?";
}

uint64_t ledger_full_bytes(CollectiveKind k, size_t count, size_t elem_bytes, int world) {
  const uint64_t n = static_cast<uint64_t>(count) * elem_bytes;
  const bool per_rank_chunks = k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllGather;
  return per_rank_chunks ? n * static_cast<uint64_t>(world) : n;
}

// Exact integer arithmetic, rounded down: numerator·n / W is computed in 128 bits so that no
// product overflows, then truncated. A single rank (W = 1) sends nothing in the ring collectives.
// Broadcast counts n whatever W is (the root, and every relay of the
// pipelined chain, sends the whole buffer once).
uint64_t ring_bytes_sent(CollectiveKind k, uint64_t full_bytes, int world) {
  ZDP_CHECK(world >= 1, "group size {} must be at least 1", world);
  const unsigned __int128 n = full_bytes;
  const unsigned __int128 w = static_cast<unsigned>(world);
  switch (k) {
    case CollectiveKind::kAllReduce: return static_cast<uint64_t>(2 * (w - 1) * n / w);
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather: return static_cast<uint64_t>((w - 1) * n / w);
    case CollectiveKind::kBroadcast: return full_bytes;
  }
  return 0;
}

TrafficLedger& TrafficLedger::global() {
  static TrafficLedger ledger;
  return ledger;
}

void TrafficLedger::record(CollectiveKind k, uint64_t full_bytes, int world, bool inter_group, uint64_t inter_host) {
  const auto i = static_cast<size_t>(k);
  const uint64_t sent = ring_bytes_sent(k, full_bytes, world);
  bytes_[i].fetch_add(sent, std::memory_order_relaxed);
  if (inter_group) inter_[i].fetch_add(sent, std::memory_order_relaxed);
  if (inter_host > 0) inter_host_[i].fetch_add(inter_host, std::memory_order_relaxed);
  calls_[i].fetch_add(1, std::memory_order_relaxed);
}

uint64_t TrafficLedger::bytes_sent(CollectiveKind k) const {
  return bytes_[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

uint64_t TrafficLedger::bytes_sent_inter_group(CollectiveKind k) const {
  return inter_[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

uint64_t TrafficLedger::bytes_sent_inter_host(CollectiveKind k) const {
  return inter_host_[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

uint64_t TrafficLedger::total_bytes_sent() const {
  uint64_t total = 0;
  for (const auto& b : bytes_) total += b.load(std::memory_order_relaxed);
  return total;
}

uint64_t TrafficLedger::calls(CollectiveKind k) const {
  return calls_[static_cast<size_t>(k)].load(std::memory_order_relaxed);
}

void TrafficLedger::reset() {
  for (auto& b : bytes_) b.store(0, std::memory_order_relaxed);
  for (auto& c : calls_) c.store(0, std::memory_order_relaxed);
  for (auto& b : inter_) b.store(0, std::memory_order_relaxed);
  for (auto& b : inter_host_) b.store(0, std::memory_order_relaxed);
}

}  // namespace zerodp::comm
