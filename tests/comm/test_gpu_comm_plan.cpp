// The GPU communicators' host-side arithmetic (comm/gpu_comm_plan.h), on the CPU: the backend
// choice, the all-to-all's chunks, and the traffic bytes (which must be the MPI backend's).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "comm/gpu_comm_plan.h"
#include "comm/traffic.h"

namespace zerodp::comm {
namespace {

TEST(GpuCommPlan, NcclWhenEveryRankHasAGpuOfItsOwn) {
  // Two hosts with two GPUs each, the same UUID hashes reused across hosts on purpose.
  const std::vector<DeviceIdentity> ranks = {{1, 10}, {1, 11}, {2, 10}, {2, 11}};
  EXPECT_EQ(choose_gpu_backend(ranks), GpuCommBackend::kNccl);
  EXPECT_EQ(choose_gpu_backend({{7, 3}}), GpuCommBackend::kNccl);  // one rank
}

TEST(GpuCommPlan, StagedWhenTwoRanksShareAGpu) {
  // W=2 on a one-GPU machine: NCCL would refuse the communicator.
  EXPECT_EQ(choose_gpu_backend({{1, 10}, {1, 10}}), GpuCommBackend::kStaged);
  // One shared GPU anywhere in the group is enough.
  EXPECT_EQ(choose_gpu_backend({{1, 10}, {1, 11}, {2, 10}, {1, 11}}), GpuCommBackend::kStaged);
}

TEST(GpuCommPlan, ForcedChoices) {
  const std::vector<DeviceIdentity> distinct = {{1, 10}, {1, 11}};
  EXPECT_EQ(choose_gpu_backend(distinct, GpuCommChoice::kStaged), GpuCommBackend::kStaged);
  EXPECT_EQ(choose_gpu_backend(distinct, GpuCommChoice::kNccl), GpuCommBackend::kNccl);
  // Forcing NCCL cannot make a shared GPU work.
  EXPECT_EQ(choose_gpu_backend({{1, 10}, {1, 10}}, GpuCommChoice::kNccl), GpuCommBackend::kStaged);

  GpuCommChoice c = GpuCommChoice::kStaged;
  EXPECT_TRUE(parse_gpu_comm_choice("", &c));
  EXPECT_EQ(c, GpuCommChoice::kAuto);
  EXPECT_TRUE(parse_gpu_comm_choice("nccl", &c));
  EXPECT_EQ(c, GpuCommChoice::kNccl);
  EXPECT_TRUE(parse_gpu_comm_choice("staged", &c));
  EXPECT_EQ(c, GpuCommChoice::kStaged);
  EXPECT_TRUE(parse_gpu_comm_choice("auto", &c));
  EXPECT_EQ(c, GpuCommChoice::kAuto);
  EXPECT_FALSE(parse_gpu_comm_choice("mpi", &c));
}

TEST(GpuCommPlan, IdentityHashIsStableAndSeparates) {
  EXPECT_EQ(fnv1a64("node-1", 6), fnv1a64("node-1", 6));
  EXPECT_NE(fnv1a64("node-1", 6), fnv1a64("node-2", 6));
  EXPECT_EQ(fnv1a64("", 0), 0xCBF29CE484222325ull);  // FNV-1a's offset basis
  EXPECT_EQ(fnv1a64("a", 1), 0xAF63DC4C8601EC8Cull);  // the published test vector
}

TEST(GpuCommPlan, ReduceScatterChunksAreTheCallersChunks) {
  const AllToAllPlan p = reduce_scatter_plan(1000, 4);
  EXPECT_EQ(p.chunk, 1000u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(p.offset(r), 1000u * r);
    EXPECT_EQ(p.length(r), 1000u);
  }
  EXPECT_EQ(p.receive_elements(), 4000u);
  EXPECT_TRUE(p.gathers_in_place());
  EXPECT_EQ(p.scratch_elements(), 4000u);
}

TEST(GpuCommPlan, AllReduceChunksCoverTheBufferOnce) {
  for (int W : {1, 2, 3, 4, 7, 8}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{10}, size_t{1023}, size_t{1024}}) {
      const AllToAllPlan p = all_reduce_plan(count, W);
      std::vector<int> covered(count, 0);
      size_t total = 0;
      for (int r = 0; r < W; ++r) {
        EXPECT_LE(p.length(r), p.chunk);
        for (size_t i = 0; i < p.length(r); ++i) ++covered[p.offset(r) + i];
        total += p.length(r);
      }
      EXPECT_EQ(total, count) << "W=" << W << " count=" << count;
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(covered[i], 1) << "element " << i;
      EXPECT_GE(p.receive_elements(), count);
      EXPECT_EQ(p.gathers_in_place(), count % static_cast<size_t>(W) == 0);
    }
  }
}

TEST(GpuCommPlan, AllReduceWithShortAndEmptyLastChunks) {
  // 10 over 4 ranks: chunks of 3, 3, 3, 1; the gather goes through scratch (4·3 = 12 > 10).
  const AllToAllPlan p = all_reduce_plan(10, 4);
  EXPECT_EQ(p.chunk, 3u);
  EXPECT_EQ(p.length(0), 3u);
  EXPECT_EQ(p.length(3), 1u);
  EXPECT_FALSE(p.gathers_in_place());
  EXPECT_EQ(p.scratch_elements(), 24u);
  // 5 over 4: chunks of 2, 2, 1, 0 (rank 3 reduces nothing, but still gathers).
  const AllToAllPlan q = all_reduce_plan(5, 4);
  EXPECT_EQ(q.chunk, 2u);
  EXPECT_EQ(q.length(2), 1u);
  EXPECT_EQ(q.length(3), 0u);
  // 1 over 2: rank 1's chunk is empty.
  EXPECT_EQ(all_reduce_plan(1, 2).length(1), 0u);
}

TEST(GpuCommPlan, ChunkOffsetsBeyondInt32) {
  // NCCL counts are size_t: a 5·2^30-element buffer over 2 ranks.
  const size_t count = size_t{5} << 30;
  const AllToAllPlan p = all_reduce_plan(count, 2);
  EXPECT_EQ(p.offset(1), count / 2);
  EXPECT_EQ(p.length(1), count / 2);
  EXPECT_EQ(reduce_scatter_plan(count, 4).offset(3), 3 * count);
}

TEST(GpuCommPlan, LedgerBytesAreTheMpiBackends) {
  // The MPI backend records count·size for all-reduce and broadcast, and the W chunks together for
  // reduce-scatter and all-gather (mpi_communicator.cpp); the ledger then applies the ring formula.
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kAllReduce, 1000, 2, 4), 2000u);
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kBroadcast, 1000, 4, 4), 4000u);
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kReduceScatter, 1000, 2, 4), 8000u);
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kAllGather, 1000, 4, 3), 12000u);
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kAllGather, 17, 1, 2), 34u);  // byte payloads
  EXPECT_EQ(ledger_full_bytes(CollectiveKind::kAllGather, size_t{3} << 30, 4, 8), (uint64_t{3} << 30) * 32);

  TrafficLedger ledger;
  ledger.record(CollectiveKind::kReduceScatter, ledger_full_bytes(CollectiveKind::kReduceScatter, 1000, 2, 4), 4);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kReduceScatter), 6000u);  // (W-1)/W of 8000
  ledger.record(CollectiveKind::kAllReduce, ledger_full_bytes(CollectiveKind::kAllReduce, 1000, 2, 4), 4);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllReduce), 3000u);  // 2(W-1)/W of 2000
}

}  // namespace
}  // namespace zerodp::comm
