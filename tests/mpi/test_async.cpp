// Several collectives in flight at once, completed by the worker while the caller does not enter
// MPI, in both progress modes.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/memory.h"
#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

class Async : public ::testing::TestWithParam<ProgressMode> {
 protected:
  void SetUp() override { comm_ = fresh_comm(GetParam()); }
  std::unique_ptr<MpiCommunicator> comm_;
};

// Eight all-reduces of different dtypes, reductions and sizes issued before any wait, then waited
// on in reverse order.
TEST_P(Async, EightAllReducesInFlight) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  constexpr int kOps = 8;
  std::vector<std::vector<std::vector<float>>> inputs;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < kOps; ++k) {
    const DType t = kAllDtypes[k % 3];
    const size_t n = 1000 + 3137 * static_cast<size_t>(k);
    inputs.emplace_back();
    for (int q = 0; q < w; ++q) inputs.back().push_back(random_values(100 + k, q, n, t));
    bufs.push_back(encode(inputs.back()[r], t));
  }
  for (int k = 0; k < kOps; ++k)
    works.push_back(c.all_reduce_async(bufs[k].data(), inputs[k][0].size(), kAllDtypes[k % 3], kAllOps[(k / 3) % 3]));
  for (int k = kOps - 1; k >= 0; --k) {
    works[k]->wait();
    const DType t = kAllDtypes[k % 3];
    EXPECT_TRUE(check_reduction(decode(bufs[k].data(), inputs[k][0].size(), t), inputs[k], 0, kAllOps[(k / 3) % 3], t))
        << "operation " << k;
  }
  for (auto& work : works) EXPECT_TRUE(work->is_completed());
}

// Every kind of collective in flight together.
TEST_P(Async, MixedCollectivesInFlight) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  const size_t count = 2047;
  std::vector<std::vector<float>> ar_in, rs_in;
  for (int q = 0; q < w; ++q) {
    ar_in.push_back(random_values(7, q, count, DType::kBF16));
    rs_in.push_back(random_values(8, q, count * w, DType::kF32));
  }
  auto ar = encode(ar_in[r], DType::kBF16);
  auto rs_send = encode(rs_in[r], DType::kF32);
  std::vector<uint8_t> rs_recv(count * 4);
  const auto ag_mine = encode(random_values(9, r, count, DType::kF16), DType::kF16);
  std::vector<uint8_t> ag_recv(count * 2 * w);
  const auto bc_root = encode(random_values(10, w - 1, count, DType::kF32), DType::kF32);
  auto bc = r == w - 1 ? bc_root : std::vector<uint8_t>(bc_root.size(), 0);

  std::vector<WorkPtr> works = {
      c.all_reduce_async(ar.data(), count, DType::kBF16, ReduceOp::kSum),
      c.reduce_scatter_async(rs_send.data(), rs_recv.data(), count, DType::kF32, ReduceOp::kAvg),
      c.barrier_async(),
      c.all_gather_async(ag_mine.data(), ag_recv.data(), count, DType::kF16),
      c.broadcast_async(bc.data(), count, DType::kF32, w - 1),
  };
  for (auto& work : works) work->wait();
  EXPECT_TRUE(check_reduction(decode(ar.data(), count, DType::kBF16), ar_in, 0, ReduceOp::kSum, DType::kBF16));
  EXPECT_TRUE(check_reduction(decode(rs_recv.data(), count, DType::kF32), rs_in, r * count, ReduceOp::kAvg, DType::kF32));
  for (int q = 0; q < w; ++q) {
    const auto theirs = encode(random_values(9, q, count, DType::kF16), DType::kF16);
    EXPECT_TRUE(std::equal(theirs.begin(), theirs.end(), ag_recv.begin() + q * count * 2)) << "chunk " << q;
  }
  EXPECT_EQ(bc, bc_root);
}

// The caller never enters MPI (no wait): the worker alone must bring the collectives to completion.
TEST_P(Async, CompletesWhileTheCallerDoesNotWait) {
  Communicator& c = *comm_;
  const int w = c.size();
  std::vector<float> a(1 << 18, 1.f), b(1 << 16, 2.f);
  auto wa = c.all_reduce_async(a.data(), a.size(), DType::kF32, ReduceOp::kSum);
  auto wb = c.all_reduce_async(b.data(), b.size(), DType::kF32, ReduceOp::kMax);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  volatile double sink = 0;  // the caller "computes" meanwhile
  while (!(wa->is_completed() && wb->is_completed()) && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 100000; ++i) sink = sink + i * 1e-9;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(wa->is_completed());
  EXPECT_TRUE(wb->is_completed());
  wa->wait();
  wb->wait();
  EXPECT_EQ(a.front(), static_cast<float>(w));
  EXPECT_EQ(a.back(), static_cast<float>(w));
  EXPECT_EQ(b[12345], 2.f);
}

TEST_P(Async, WaitTwiceAndAfterCompletion) {
  Communicator& c = *comm_;
  float x = 1.f;
  auto work = c.all_reduce_async(&x, 1, DType::kF32, ReduceOp::kSum);
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_NO_THROW(work->wait());
  EXPECT_EQ(x, static_cast<float>(c.size()));
}

// More small collectives issued back to back than the worker starts at once (max_in_flight): the
// rest wait in its queue and start as earlier ones complete.
TEST_P(Async, ManyQueuedCollectivesCompleteInOrder) {
  Communicator& c = *comm_;
  constexpr int kOps = 64;
  std::vector<float> vals(kOps);
  std::vector<WorkPtr> works;
  for (int k = 0; k < kOps; ++k) {
    vals[k] = static_cast<float>(k);
    works.push_back(c.all_reduce_async(&vals[k], 1, DType::kF32, ReduceOp::kSum));
  }
  for (int k = 0; k < kOps; ++k) {
    works[k]->wait();
    EXPECT_EQ(vals[k], static_cast<float>(k * c.size())) << k;
  }
}

// The reductions' staging (category comm) is allocated when a reduction is issued and freed when
// the last one issued is waited for, both on the caller's thread: what the ledger records does not
// depend on when the worker runs them. Before, the worker allocated and freed it, and a peak taken
// while the caller allocated beside a reduction in flight came out differently from run to run.
TEST_P(Async, StagingIsAccountedInIssueOrder) {
  Communicator& c = *comm_;
  const int w = c.size();
  MemoryLedger& ledger = MemoryLedger::global();
  const size_t n = 50000;  // per rank: a reduce-scatter of W·n elements, staged in pieces
  std::vector<float> send(n * static_cast<size_t>(w), 1.0f), recv(n);
  const size_t stage_rs = ordered_reduction_staging_bytes_for(false, n, DType::kF32, w);
  const size_t big_n = 2 * n * static_cast<size_t>(w);  // chunks of 2n: more staged than n
  const size_t stage_ar = ordered_reduction_staging_bytes_for(true, big_n, DType::kF32, w);
  if (w == 1) {
    EXPECT_EQ(stage_rs, 0u);
  } else {
    EXPECT_GT(stage_rs, 0u);
    EXPECT_GT(stage_ar, stage_rs);
  }
  const uint64_t comm_before = ledger.live(MemCategory::kComm);
  for (int round = 0; round < 3; ++round) {
    ledger.reset_peaks();
    WorkPtr first = c.reduce_scatter_async(send.data(), recv.data(), n, DType::kF32, ReduceOp::kSum);
    EXPECT_EQ(ledger.live(MemCategory::kComm), comm_before + stage_rs) << "allocated at issue";
    // Whether or not the worker has finished it, the staging is still accounted for here.
    if (round == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    WorkPtr second = c.reduce_scatter_async(send.data(), recv.data(), n, DType::kF32, ReduceOp::kSum);
    std::vector<float> big(big_n, 1.0f);
    WorkPtr third = c.all_reduce_async(big.data(), big.size(), DType::kF32, ReduceOp::kSum);  // grows it
    EXPECT_EQ(ledger.live(MemCategory::kComm), comm_before + std::max(stage_rs, stage_ar));
    first->wait();
    second->wait();
    EXPECT_EQ(ledger.live(MemCategory::kComm), comm_before + std::max(stage_rs, stage_ar))
        << "kept until the last reduction issued is waited for";
    third->wait();
    EXPECT_EQ(ledger.live(MemCategory::kComm), comm_before) << "freed by the wait for the last";
    // Growing frees the smaller buffer first: the peak is the larger one alone.
    EXPECT_EQ(ledger.peak(MemCategory::kComm), comm_before + std::max(stage_rs, stage_ar));
    for (float v : recv) ASSERT_EQ(v, static_cast<float>(w));
    for (float v : big) ASSERT_EQ(v, static_cast<float>(w));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Async, ::testing::Values(ProgressMode::kPoll, ProgressMode::kBlocking), mode_name);

}  // namespace
}  // namespace zerodp::comm::testing
