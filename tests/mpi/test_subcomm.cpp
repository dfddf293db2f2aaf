// Sub-communicators: the layouts hybrid sharding uses (with 4 ranks, groups {0,1},{2,3} and the
// groups crossing them, {0,2},{1,3}), key order, ranks that join no group, and collectives on two
// overlapping communicators at once.
#include <gtest/gtest.h>

#include <numeric>

#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

// The world ranks of the group `rank` falls in when every rank picks color_of(rank), ordered by world rank.
template <typename ColorOf>
std::vector<int> members(int world_size, int rank, ColorOf color_of) {
  std::vector<int> m;
  for (int q = 0; q < world_size; ++q)
    if (color_of(q) == color_of(rank)) m.push_back(q);
  return m;
}

class SubComm : public ::testing::TestWithParam<ProgressMode> {};

TEST_P(SubComm, HybridShardingLayoutsWithCollectivesOnBothAtOnce) {
  auto parent = fresh_comm(GetParam());
  const int w = parent->size(), r = parent->rank();
  auto row_of = [](int q) { return q / 2; };  // {0,1},{2,3}
  auto col_of = [](int q) { return q % 2; };  // {0,2},{1,3}
  auto rows = parent->split(row_of(r), r);
  auto cols = parent->split(col_of(r), r);
  ASSERT_NE(rows, nullptr);
  ASSERT_NE(cols, nullptr);
  const auto row_members = members(w, r, row_of), col_members = members(w, r, col_of);
  EXPECT_EQ(rows->size(), static_cast<int>(row_members.size()));
  EXPECT_EQ(cols->size(), static_cast<int>(col_members.size()));
  EXPECT_EQ(row_members[rows->rank()], r);
  EXPECT_EQ(col_members[cols->rank()], r);
  if (w == 4) {
    EXPECT_EQ(row_members, (r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}));
    EXPECT_EQ(col_members, (r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}));
  }

  // In flight at once: an all-reduce and a reduce-scatter on the rows, an all-reduce and an
  // all-gather on the columns.
  const size_t n = 3001, count = 777;
  std::vector<std::vector<float>> row_in, col_in, rs_in;
  for (int q : row_members) row_in.push_back(random_values(21, q, n, DType::kF32));
  for (int q : col_members) col_in.push_back(random_values(22, q, n, DType::kBF16));
  for (int q : row_members) rs_in.push_back(random_values(23, q, count * row_members.size(), DType::kF16));
  auto row_buf = encode(row_in[rows->rank()], DType::kF32);
  auto col_buf = encode(col_in[cols->rank()], DType::kBF16);
  const auto rs_send = encode(rs_in[rows->rank()], DType::kF16);
  std::vector<uint8_t> rs_recv(count * 2);
  const float mine = static_cast<float>(r);
  std::vector<float> gathered(col_members.size(), -1.f);

  auto w1 = rows->all_reduce_async(row_buf.data(), n, DType::kF32, ReduceOp::kSum);
  auto w2 = cols->all_reduce_async(col_buf.data(), n, DType::kBF16, ReduceOp::kAvg);
  auto w3 = rows->reduce_scatter_async(rs_send.data(), rs_recv.data(), count, DType::kF16, ReduceOp::kSum);
  auto w4 = cols->all_gather_async(&mine, gathered.data(), 1, DType::kF32);
  w4->wait();
  w3->wait();
  w2->wait();
  w1->wait();
  EXPECT_TRUE(check_reduction(decode(row_buf.data(), n, DType::kF32), row_in, 0, ReduceOp::kSum, DType::kF32));
  EXPECT_TRUE(check_reduction(decode(col_buf.data(), n, DType::kBF16), col_in, 0, ReduceOp::kAvg, DType::kBF16));
  EXPECT_TRUE(check_reduction(decode(rs_recv.data(), count, DType::kF16), rs_in, rows->rank() * count,
                              ReduceOp::kSum, DType::kF16));
  for (size_t i = 0; i < col_members.size(); ++i) EXPECT_EQ(gathered[i], static_cast<float>(col_members[i]));

  // And the parent still works after its children.
  float one = 1.f;
  parent->all_reduce(&one, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(one, static_cast<float>(w));
}

TEST_P(SubComm, KeyOrdersTheRanks) {
  auto parent = fresh_comm(GetParam());
  const int w = parent->size(), r = parent->rank();
  auto reversed = parent->split(0, -r);
  ASSERT_NE(reversed, nullptr);
  EXPECT_EQ(reversed->rank(), w - 1 - r);
  const float mine = static_cast<float>(r);
  std::vector<float> all(w);
  reversed->all_gather(&mine, all.data(), 1, DType::kF32);
  for (int i = 0; i < w; ++i) EXPECT_EQ(all[i], static_cast<float>(w - 1 - i));
}

TEST_P(SubComm, NegativeColorJoinsNoGroup) {
  auto parent = fresh_comm(GetParam());
  const int w = parent->size(), r = parent->rank();
  auto sub = parent->split(r == 0 ? -1 : 5, r);
  if (r == 0) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), w - 1);
  EXPECT_EQ(sub->rank(), r - 1);
  float x = 1.f;
  sub->all_reduce(&x, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(x, static_cast<float>(w - 1));
}

TEST_P(SubComm, NestedSplitAndInheritedLedgerAndMode) {
  TrafficLedger ledger;
  auto parent = fresh_comm(GetParam(), &ledger);
  const int r = parent->rank();
  auto halves = parent->split(r % 2, r);
  auto singles = halves->split(halves->rank(), 0);
  ASSERT_NE(singles, nullptr);
  EXPECT_EQ(singles->size(), 1);
  EXPECT_EQ(singles->rank(), 0);
  EXPECT_EQ(&halves->traffic(), &ledger);
  EXPECT_EQ(&singles->traffic(), &ledger);
  EXPECT_EQ(dynamic_cast<MpiCommunicator&>(*singles).options().progress, GetParam());
  std::vector<float> v = {1.f, 2.f};
  singles->all_reduce(v.data(), 2, DType::kF32, ReduceOp::kAvg);  // a group of one: unchanged
  EXPECT_EQ(v, (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllReduce), 1u);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllReduce), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, SubComm, ::testing::Values(ProgressMode::kPoll, ProgressMode::kBlocking), mode_name);

}  // namespace
}  // namespace zerodp::comm::testing
