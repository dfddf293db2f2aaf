// The ring formulas of the traffic ledger and the ledger that sums them, without MPI.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "comm/traffic.h"

namespace zerodp::comm {
namespace {

TEST(RingBytes, HandComputedExamples) {
  // W = 4, n = 1000: all-reduce 2·3/4·1000 = 1500, reduce-scatter and all-gather 3/4·1000 = 750.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, 1000, 4), 1500u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, 1000, 4), 750u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllGather, 1000, 4), 750u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kBroadcast, 1000, 4), 1000u);
  // W = 2: all-reduce sends n, reduce-scatter n/2.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, 4096, 2), 4096u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, 4096, 2), 2048u);
}

TEST(RingBytes, RoundsDownWhenWDoesNotDivide) {
  // W = 3, n = 10: 2·2·10/3 = 13.33 -> 13 and 2·10/3 = 6.67 -> 6.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, 10, 3), 13u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, 10, 3), 6u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllGather, 10, 3), 6u);
  // n = 1, W = 4: 1.5 -> 1 and 0.75 -> 0.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, 1, 4), 1u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, 1, 4), 0u);
}

TEST(RingBytes, SingleRankSendsNothingInRingCollectives) {
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, 12345, 1), 0u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, 12345, 1), 0u);
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllGather, 12345, 1), 0u);
}

TEST(RingBytes, ExactForHugeBuffersWithoutOverflow) {
  // (W-1)·n overflows 64 bits here; the result must still be the exact floor.
  const uint64_t n = (uint64_t{1} << 62) + 7;  // 4611686018427387911
  // 2·6·n/7 = 12n/7: 12n = 55340232221128654932 = 7·7905747460161236418 + 6.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, n, 7), 7905747460161236418ull);
  // 6n/7 = 27670116110564327466/7 = 3952873730080618209 remainder 3.
  EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllGather, n, 7), 3952873730080618209ull);
}

TEST(RingBytes, MatchesTheFormulaOverAGrid) {
  for (int w = 1; w <= 9; ++w) {
    for (uint64_t n : {0ull, 1ull, 2ull, 3ull, 17ull, 1000ull, 4099ull, 1ull << 33}) {
      EXPECT_EQ(ring_bytes_sent(CollectiveKind::kAllReduce, n, w), 2 * (w - 1) * n / w) << n << " " << w;
      EXPECT_EQ(ring_bytes_sent(CollectiveKind::kReduceScatter, n, w), (w - 1) * n / w) << n << " " << w;
      EXPECT_EQ(ring_bytes_sent(CollectiveKind::kBroadcast, n, w), n);
    }
  }
}

TEST(RingBytes, RejectsAnEmptyGroup) {
  EXPECT_ANY_THROW(ring_bytes_sent(CollectiveKind::kAllReduce, 10, 0));
}

TEST(TrafficLedger, AccumulatesPerKindAndResets) {
  TrafficLedger ledger;
  ledger.record(CollectiveKind::kAllReduce, 1000, 4);
  ledger.record(CollectiveKind::kAllReduce, 10, 3);
  ledger.record(CollectiveKind::kAllGather, 1000, 4);
  ledger.record(CollectiveKind::kBroadcast, 0, 4);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllReduce), 1500u + 13u);
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllReduce), 2u);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllGather), 750u);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kReduceScatter), 0u);
  EXPECT_EQ(ledger.calls(CollectiveKind::kBroadcast), 1u);
  EXPECT_EQ(ledger.total_bytes_sent(), 1500u + 13u + 750u);
  ledger.reset();
  EXPECT_EQ(ledger.total_bytes_sent(), 0u);
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllReduce), 0u);
}

TEST(TrafficLedger, CountsEveryRecordFromSeveralThreads) {
  TrafficLedger ledger;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&ledger] {
      for (int i = 0; i < 1000; ++i) ledger.record(CollectiveKind::kReduceScatter, 400, 4);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ledger.calls(CollectiveKind::kReduceScatter), 4000u);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kReduceScatter), 4000u * 300u);
}

TEST(TrafficLedger, NamesAreTheMetricsKeys) {
  EXPECT_STREQ(collective_name(CollectiveKind::kAllReduce), "all_reduce");
  EXPECT_STREQ(collective_name(CollectiveKind::kReduceScatter), "reduce_scatter");
  EXPECT_STREQ(collective_name(CollectiveKind::kAllGather), "all_gather");
  EXPECT_STREQ(collective_name(CollectiveKind::kBroadcast), "broadcast");
}

}  // namespace
}  // namespace zerodp::comm
