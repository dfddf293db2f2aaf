// The two-level collectives (comm/mpi_two_level.h) against the flat ones, on one machine: hosts
// are groups of N consecutive ranks (MpiOptions::ranks_per_host_for_testing). Reduce-scatters
// must give the flat ordered reduction's bits, all-gathers the same chunks, in every dtype, both
// forms and both progress modes, and the ledger counts what the algorithm sends across.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "comm/mpi_two_level.h"
#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

// A communicator over all ranks taking groups of `per_host` consecutive ranks for hosts, that has
// learned them (two levels where the layout allows).
std::unique_ptr<MpiCommunicator> comm_on_hosts(ProgressMode mode, int per_host, TrafficLedger* ledger) {
  MpiCommunicator& w = world_mpi();
  MpiOptions o = w.options();
  o.progress = mode;
  o.ranks_per_host_for_testing = per_host;
  auto c = w.split_mpi(0, w.rank(), o);
  c->set_traffic_ledger(ledger);
  c->learn_hosts(/*two_level=*/true);
  return c;
}

class TwoLevel : public ::testing::TestWithParam<std::tuple<ProgressMode, int>> {};

TEST_P(TwoLevel, ReduceScatterAndAllGatherGiveTheFlatBits) {
  const auto [mode, per_host] = GetParam();
  TrafficLedger ledger, flat_ledger;
  auto hosts = comm_on_hosts(mode, per_host, &ledger);
  auto flat = fresh_comm(mode, &flat_ledger);
  const int W = hosts->size(), r = hosts->rank();
  const HostLayout& layout = hosts->host_layout();
  const bool expect_two_level = W % per_host == 0 && W / per_host > 1 && per_host > 1;
  EXPECT_EQ(layout.two_level, expect_two_level) << "W=" << W << ", " << per_host << " a host";
  EXPECT_EQ(layout.hosts, (W + per_host - 1) / per_host);
  if (layout.two_level) {
    EXPECT_EQ(layout.ranks_per_host, per_host);
  }

  uint64_t across_rs = 0, across_ag = 0;
  // Counts below one piece, one piece and a bit (the pipeline), and an odd one.
  for (const size_t count : {size_t{1}, size_t{777}, two_level_piece_elements() + 3}) {
    for (const DType t : kAllDtypes) {
      const size_t es = dtype_size(t);
      const auto all = encode(random_values(61 + count, r, count * static_cast<size_t>(W), t), t);
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        std::vector<uint8_t> got(count * es), want(count * es);
        hosts->reduce_scatter(all.data(), got.data(), count, t, op);
        flat->reduce_scatter(all.data(), want.data(), count, t, op);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
            << "reduce-scatter " << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
        across_rs += bytes_across_hosts(layout, CollectiveKind::kReduceScatter, count, es, r, layout.two_level);
        // In place: the result lands in this rank's chunk of the buffer.
        auto inplace = all;
        hosts->reduce_scatter(inplace.data(), inplace.data() + static_cast<size_t>(r) * count * es, count, t, op);
        ASSERT_EQ(std::memcmp(inplace.data() + static_cast<size_t>(r) * count * es, want.data(), want.size()), 0)
            << "in-place reduce-scatter " << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
        across_rs += bytes_across_hosts(layout, CollectiveKind::kReduceScatter, count, es, r, layout.two_level);
      }
      // All-gather, out of place and in place: every rank's chunk in its place.
      const auto mine = encode(random_values(71 + count, r, count, t), t);
      std::vector<uint8_t> gathered(count * es * static_cast<size_t>(W), 0xEE);
      hosts->all_gather(mine.data(), gathered.data(), count, t);
      std::vector<uint8_t> inplace(gathered.size(), 0xEE);
      std::memcpy(inplace.data() + static_cast<size_t>(r) * count * es, mine.data(), mine.size());
      hosts->all_gather(inplace.data() + static_cast<size_t>(r) * count * es, inplace.data(), count, t);
      for (int q = 0; q < W; ++q) {
        const auto theirs = encode(random_values(71 + count, q, count, t), t);
        ASSERT_EQ(std::memcmp(gathered.data() + static_cast<size_t>(q) * count * es, theirs.data(), theirs.size()), 0)
            << "all-gather, rank " << q << "'s chunk, " << dtype_name(t) << " count " << count;
        ASSERT_EQ(std::memcmp(inplace.data() + static_cast<size_t>(q) * count * es, theirs.data(), theirs.size()), 0)
            << "in-place all-gather, rank " << q << "'s chunk, " << dtype_name(t) << " count " << count;
      }
      across_ag += 2 * bytes_across_hosts(layout, CollectiveKind::kAllGather, count, es, r, layout.two_level);
    }
  }
  // A max is not a sum: it runs flat, and the ledger counts the ring model.
  std::vector<float> m(static_cast<size_t>(W) * 5, static_cast<float>(r)), out(5);
  hosts->reduce_scatter(m.data(), out.data(), 5, DType::kF32, ReduceOp::kMax);
  EXPECT_EQ(out[0], static_cast<float>(W - 1));
  across_rs += bytes_across_hosts(layout, CollectiveKind::kReduceScatter, 5, 4, r, false);
  EXPECT_EQ(ledger.bytes_sent_inter_host(CollectiveKind::kReduceScatter), across_rs);
  EXPECT_EQ(ledger.bytes_sent_inter_host(CollectiveKind::kAllGather), across_ag);
  // The ring counts do not depend on the algorithm: twice the flat run's reduce-scatters, and the max.
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kReduceScatter),
            2 * flat_ledger.bytes_sent(CollectiveKind::kReduceScatter) +
                ring_bytes_sent(CollectiveKind::kReduceScatter, static_cast<uint64_t>(W) * 20, W));
  // The flat communicator never learned its hosts: it counts nothing across.
  EXPECT_EQ(flat_ledger.bytes_sent_inter_host(CollectiveKind::kReduceScatter), 0u);
}

// ZeRO++'s qgZ: what crosses hosts is quantized, so the result is the exact one within the
// quantization's error: half a step (1/127 of a block's largest magnitude) per hop, over the H − 1
// hops of the partial sums and the hop back to the owner. Where the reduce-scatter does not run in two
// levels it is exact: the flat bits.
TEST_P(TwoLevel, QuantizedReduceScatterIsWithinTheQuantizationErrorOfTheExactOne) {
  const auto [mode, per_host] = GetParam();
  TrafficLedger ledger, flat_ledger;
  auto hosts = comm_on_hosts(mode, per_host, &ledger);
  auto flat = fresh_comm(mode, &flat_ledger);
  const int W = hosts->size(), r = hosts->rank();
  const HostLayout& layout = hosts->host_layout();
  uint64_t across = 0;
  for (const size_t count : {size_t{300}, two_level_piece_elements() + 7}) {
    for (const DType t : kAllDtypes) {
      const size_t es = dtype_size(t);
      const auto all = encode(random_values(81 + count, r, count * static_cast<size_t>(W), t), t);
      for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        std::vector<uint8_t> got(count * es), want(count * es);
        hosts->reduce_scatter_quantized_async(all.data(), got.data(), count, t, op)->wait();
        flat->reduce_scatter(all.data(), want.data(), count, t, op);
        across += bytes_across_hosts(layout, CollectiveKind::kReduceScatter, count, es, r, layout.two_level, true);
        if (!layout.two_level) {
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << "flat: exact";
          continue;
        }
        // Partial sums of W values in [-1, 1) stay below W; each hop errs by at most half a step of
        // W/127; the dtype's own rounding of the result adds its unit roundoff.
        const auto g = decode(got.data(), count, t), e = decode(want.data(), count, t);
        const double hops = layout.hosts, scale = op == ReduceOp::kAvg ? 1.0 / W : 1.0;
        const double tol = (hops * 0.5 * W / 127.0) * scale + 2 * unit_roundoff(t) * W * scale;
        double worst = 0;
        for (size_t i = 0; i < count; ++i) worst = std::max(worst, std::fabs(static_cast<double>(g[i]) - e[i]));
        EXPECT_LE(worst, tol) << dtype_name(t) << " " << reduce_op_name(op) << " count " << count;
        EXPECT_GT(worst, 0.0) << "quantized, some value should differ from the exact sum";
      }
    }
  }
  EXPECT_EQ(ledger.bytes_sent_inter_host(CollectiveKind::kReduceScatter), across);
  if (layout.two_level && layout.hosts == 2 && r == 0) {
    // Host 0 sends its lane's partial sums: about a quarter of the fp32 bytes.
    const uint64_t exact = bytes_across_hosts(layout, CollectiveKind::kReduceScatter, 300, 4, 0, true, false);
    const uint64_t q = bytes_across_hosts(layout, CollectiveKind::kReduceScatter, 300, 4, 0, true, true);
    EXPECT_EQ(exact, 2u * 300u * 4u);
    EXPECT_EQ(q, 2u * (300u + 4u * 2u));  // two blocks of scales per 300-element piece
  }
}

TEST_P(TwoLevel, SplitsLearnTheirOwnLayout) {
  const auto [mode, per_host] = GetParam();
  TrafficLedger ledger;
  auto hosts = comm_on_hosts(mode, per_host, &ledger);
  const int W = hosts->size(), r = hosts->rank();
  // The ranks of even index: on ⌈per_host/2⌉ of each host's ranks.
  auto evens = hosts->split(r % 2 == 0 ? 0 : -1, r);
  if (r % 2 != 0) {
    EXPECT_EQ(evens, nullptr);
    return;
  }
  ASSERT_NE(evens, nullptr);
  const HostLayout& l = evens->host_layout();
  EXPECT_EQ(static_cast<int>(l.host_of.size()), (W + 1) / 2);
  for (int q = 0; q < evens->size(); ++q)
    for (int p = 0; p < evens->size(); ++p)
      EXPECT_EQ(l.host_of[static_cast<size_t>(q)] == l.host_of[static_cast<size_t>(p)],
                (2 * q) / per_host == (2 * p) / per_host);
  std::vector<float> x(static_cast<size_t>(evens->size()) * 3, 1.f), y(3);
  evens->reduce_scatter(x.data(), y.data(), 3, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(y[0], static_cast<float>(evens->size()));
}

INSTANTIATE_TEST_SUITE_P(Hosts, TwoLevel,
                         ::testing::Combine(::testing::Values(ProgressMode::kBlocking, ProgressMode::kPoll),
                                            ::testing::Values(1, 2, 3)),
                         [](const auto& info) {
                           return std::string(progress_mode_name(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "_a_host";
                         });

}  // namespace
}  // namespace zerodp::comm::testing
