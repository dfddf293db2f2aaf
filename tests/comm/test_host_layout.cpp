// Host layouts and the bytes that cross between hosts (comm/host_layout.h), without MPI.
#include <gtest/gtest.h>

#include <climits>
#include <vector>

#include "comm/host_layout.h"

namespace zerodp::comm {
namespace {

HostLayout two_level(std::vector<int> hosts) {
  HostLayout l = HostLayout::from_hosts(hosts);
  l.two_level = l.hosts > 1 && l.ranks_per_host > 1;
  return l;
}

TEST(HostLayout, ConsecutiveRanksOnEqualHostsAreRegular) {
  const HostLayout l = HostLayout::from_hosts({7, 7, 3, 3, 9, 9});  // any host ids, numbered by first rank
  EXPECT_EQ(l.hosts, 3);
  EXPECT_EQ(l.ranks_per_host, 2);
  EXPECT_EQ(l.host_of, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_TRUE(l.spans_hosts());
}

TEST(HostLayout, InterleavedOrUnequalHostsAreNotRegular) {
  EXPECT_EQ(HostLayout::from_hosts({0, 1, 0, 1}).ranks_per_host, 0);  // round-robin placement
  EXPECT_EQ(HostLayout::from_hosts({0, 0, 0, 1}).ranks_per_host, 0);  // 3 + 1
  EXPECT_EQ(HostLayout::from_hosts({0, 0, 1}).ranks_per_host, 0);
  const HostLayout one = HostLayout::from_hosts({4, 4, 4});
  EXPECT_EQ(one.hosts, 1);
  EXPECT_EQ(one.ranks_per_host, 3);
  EXPECT_FALSE(one.spans_hosts());
}

TEST(HostLayout, TwoLevelsRunReduceScattersOfSumsAndAllGathersOnly) {
  const HostLayout l = two_level({0, 0, 1, 1});
  ASSERT_TRUE(l.two_level);
  EXPECT_TRUE(runs_in_two_levels(l, CollectiveKind::kReduceScatter, true, 10));
  EXPECT_FALSE(runs_in_two_levels(l, CollectiveKind::kReduceScatter, false, 10));  // a max
  EXPECT_TRUE(runs_in_two_levels(l, CollectiveKind::kAllGather, false, 10));
  EXPECT_FALSE(runs_in_two_levels(l, CollectiveKind::kAllReduce, true, 10));
  EXPECT_FALSE(runs_in_two_levels(l, CollectiveKind::kBroadcast, false, 10));
  EXPECT_FALSE(runs_in_two_levels(l, CollectiveKind::kAllGather, false, 0));
  // The all-gather's datatypes hold L·count in an int.
  EXPECT_TRUE(runs_in_two_levels(l, CollectiveKind::kAllGather, false, INT_MAX / 2));
  EXPECT_FALSE(runs_in_two_levels(l, CollectiveKind::kAllGather, false, INT_MAX / 2 + 1));
  EXPECT_FALSE(runs_in_two_levels(HostLayout::from_hosts({0, 0, 1, 1}), CollectiveKind::kAllGather, false, 10));
}

TEST(BytesAcrossHosts, TheRingModelCountsTheRanksWhoseSuccessorIsElsewhere) {
  const HostLayout l = HostLayout::from_hosts({0, 0, 1, 1});
  // Reduce-scatter of 100 fp32 a rank: full buffer 1600 bytes, ring share 3/4 of it, 1200.
  const uint64_t share = 1200;
  EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kReduceScatter, 100, 4, 0, false), 0u);
  EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kReduceScatter, 100, 4, 1, false), share);  // 1 → 2
  EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kReduceScatter, 100, 4, 2, false), 0u);
  EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kReduceScatter, 100, 4, 3, false), share);  // 3 → 0
  // Round-robin placement: every successor is on the other host.
  const HostLayout rr = HostLayout::from_hosts({0, 1, 0, 1});
  for (int r = 0; r < 4; ++r) EXPECT_EQ(bytes_across_hosts(rr, CollectiveKind::kAllGather, 100, 4, r, false), share);
  // One host: nothing crosses.
  EXPECT_EQ(bytes_across_hosts(HostLayout::from_hosts({0, 0}), CollectiveKind::kAllReduce, 100, 4, 1, false), 0u);
}

TEST(BytesAcrossHosts, TwoLevelsCountWhatTheAlgorithmSends) {
  // 3 hosts × 2 ranks, 10 bf16 elements a chunk (20 bytes).
  const HostLayout l = two_level({0, 0, 1, 1, 2, 2});
  for (int r = 0; r < 6; ++r) {
    // All-gather: its chunk to the 2 other hosts.
    EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kAllGather, 10, 2, r, true), 40u);
    // Reduce-scatter: hosts 0 and 1 pass on the fp32 partial sums of their lane (3 chunks of 10);
    // host 2 sends two finished chunks.
    EXPECT_EQ(bytes_across_hosts(l, CollectiveKind::kReduceScatter, 10, 2, r, true), r < 4 ? 120u : 40u);
  }
}

}  // namespace
}  // namespace zerodp::comm
