// The traffic ledger: bytes each rank sends per kind of collective, counted as the ring algorithm
// sends them whatever the library does underneath: for n the bytes of the full
// buffer and W the group size, all-reduce 2(W-1)/W·n, reduce-scatter and all-gather (W-1)/W·n,
// broadcast n. With hybrid sharding it also counts the part that crossed a shard-group boundary:
// the bytes of the collectives in which the rank's ring successor is in another group (the metrics'
// bytes_sent_inter_group). Where a group spans several hosts it also counts the bytes each rank sent
// to another host (comm/host_layout.h: the two-level algorithms' own, or the ring model's).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zerodp::comm {

enum class CollectiveKind : uint8_t { kAllReduce = 0, kReduceScatter, kAllGather, kBroadcast };
constexpr size_t kNumCollectiveKinds = 4;
// "all_reduce", "reduce_scatter", "all_gather", "broadcast": the keys of the metrics.
const char* collective_name(CollectiveKind k);

// The full-buffer bytes of a collective of `count` elements of `elem_bytes` each (1 for bytes) in a
// group of `world`: the all-reduced or broadcast buffer, and for reduce-scatter and all-gather the
// W chunks together. What every backend records (the front half of comm/communicator.h), so that
// the planner's numbers hold whatever the backend.
uint64_t ledger_full_bytes(CollectiveKind k, size_t count, size_t elem_bytes, int world);

// Ring bytes one rank sends for a collective over a full buffer of `full_bytes` in a group of `world`.
uint64_t ring_bytes_sent(CollectiveKind k, uint64_t full_bytes, int world);

class TrafficLedger {
 public:
  static TrafficLedger& global();

  // inter_group: the rank's ring successor in this collective's group is in another shard group.
  // inter_host: the bytes this rank sent to other hosts for it (comm/host_layout.h).
  void record(CollectiveKind k, uint64_t full_bytes, int world, bool inter_group = false, uint64_t inter_host = 0);
  uint64_t bytes_sent(CollectiveKind k) const;
  uint64_t bytes_sent_inter_group(CollectiveKind k) const;
  uint64_t bytes_sent_inter_host(CollectiveKind k) const;
  uint64_t total_bytes_sent() const;
  uint64_t calls(CollectiveKind k) const;
  void reset();

 private:
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> bytes_{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> calls_{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> inter_{};
  std::array<std::atomic<uint64_t>, kNumCollectiveKinds> inter_host_{};
};

}  // namespace zerodp::comm
