// Every collective against a plain computation on random data: all dtypes and reductions, sizes the
// group size does not divide and zero, in and out of place, in both progress modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

// Element counts: zero, tiny, primes (W never divides them all), sizes past OpenMPI's eager limit
// and into its pipelined/ring algorithms, and a few random ones (the same on every rank).
std::vector<size_t> counts_to_test() {
  std::vector<size_t> counts = {0, 1, 2, 3, 7, 64, 1001, 4099, 65537};
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<size_t> d(1, 20000);
  for (int i = 0; i < 3; ++i) counts.push_back(d(rng));
  return counts;
}

uint64_t case_seed(DType t, ReduceOp op, size_t count, int salt) {
  return (static_cast<uint64_t>(t) * 31 + static_cast<uint64_t>(op)) * 1000003u + count * 17u + salt;
}

std::vector<std::vector<float>> inputs_of_all_ranks(uint64_t seed, int w, size_t n, DType t) {
  std::vector<std::vector<float>> in;
  for (int r = 0; r < w; ++r) in.push_back(random_values(seed, r, n, t));
  return in;
}

class Collectives : public ::testing::TestWithParam<ProgressMode> {
 protected:
  void SetUp() override { comm_ = fresh_comm(GetParam()); }
  std::unique_ptr<MpiCommunicator> comm_;
};

TEST_P(Collectives, AllReduceMatchesThePlainComputation) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  for (DType t : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t n : counts_to_test()) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << reduce_op_name(op) << " n=" << n);
        const auto in = inputs_of_all_ranks(case_seed(t, op, n, 1), w, n, t);
        auto buf = encode(in[r], t);
        c.all_reduce(buf.data(), n, t, op);
        EXPECT_TRUE(check_reduction(decode(buf.data(), n, t), in, 0, op, t));
        // Replicas must stay identical: every rank holds the same bits.
        EXPECT_TRUE(same_on_all_ranks(c, checksum(buf.data(), buf.size())));
      }
    }
  }
}

// Small integers: every partial sum is exact in every dtype, so the result is exact too.
TEST_P(Collectives, AllReduceOfIntegersIsExact) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  const size_t n = 777;
  for (DType t : kAllDtypes) {
    std::vector<float> mine(n), expected(n, 0.f);
    for (size_t i = 0; i < n; ++i) {
      mine[i] = static_cast<float>((static_cast<int>(i) * (r + 3)) % 17 - 8);
      for (int q = 0; q < w; ++q) expected[i] += static_cast<float>((static_cast<int>(i) * (q + 3)) % 17 - 8);
    }
    auto buf = encode(mine, t);
    c.all_reduce(buf.data(), n, t, ReduceOp::kSum);
    EXPECT_EQ(decode(buf.data(), n, t), expected) << dtype_name(t);
  }
}

TEST_P(Collectives, ReduceScatterOutOfPlace) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  for (DType t : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t count : counts_to_test()) {
        if (count > 20000) continue;  // count is per rank here: the full buffer is W·count
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << reduce_op_name(op) << " count=" << count);
        const auto in = inputs_of_all_ranks(case_seed(t, op, count, 2), w, count * w, t);
        const auto send = encode(in[r], t);
        const auto send_before = send;
        std::vector<uint8_t> recv(count * dtype_size(t) + 8, 0xAB);  // 8 guard bytes past the end
        c.reduce_scatter(send.data(), recv.data(), count, t, op);
        EXPECT_TRUE(check_reduction(decode(recv.data(), count, t), in, r * count, op, t));
        EXPECT_EQ(send, send_before) << "the input was modified";
        EXPECT_TRUE(std::all_of(recv.end() - 8, recv.end(), [](uint8_t b) { return b == 0xAB; }))
            << "wrote past the end of recv";
      }
    }
  }
}

// NCCL's in-place form: recv = send + rank·count. The rank's chunk receives the result (the rest of
// the buffer is unspecified afterwards, see communicator.h).
TEST_P(Collectives, ReduceScatterInPlace) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  for (DType t : kAllDtypes) {
    for (ReduceOp op : kAllOps) {
      for (size_t count : {size_t{1}, size_t{5}, size_t{1001}, size_t{12345}}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " " << reduce_op_name(op) << " count=" << count);
        const auto in = inputs_of_all_ranks(case_seed(t, op, count, 3), w, count * w, t);
        const size_t chunk = count * dtype_size(t);
        auto buf = encode(in[r], t);
        buf.resize(buf.size() + 8, 0xAB);  // guard bytes past the end
        c.reduce_scatter(buf.data(), buf.data() + r * chunk, count, t, op);
        EXPECT_TRUE(check_reduction(decode(buf.data() + r * chunk, count, t), in, r * count, op, t));
        EXPECT_TRUE(std::all_of(buf.end() - 8, buf.end(), [](uint8_t b) { return b == 0xAB; }));
      }
    }
  }
}

TEST_P(Collectives, AllGatherOutOfPlaceAndInPlace) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  for (DType t : kAllDtypes) {
    for (size_t count : counts_to_test()) {
      if (count > 20000) continue;
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " count=" << count);
      const size_t chunk = count * dtype_size(t);
      std::vector<uint8_t> expected;
      for (int q = 0; q < w; ++q) {
        const auto part = encode(random_values(case_seed(t, ReduceOp::kSum, count, 4), q, count, t), t);
        expected.insert(expected.end(), part.begin(), part.end());
      }
      const std::vector<uint8_t> mine(expected.begin() + r * chunk, expected.begin() + (r + 1) * chunk);
      std::vector<uint8_t> recv(w * chunk + 8, 0xCD);
      c.all_gather(mine.data(), recv.data(), count, t);
      EXPECT_TRUE(std::equal(expected.begin(), expected.end(), recv.begin()));
      EXPECT_TRUE(std::all_of(recv.end() - 8, recv.end(), [](uint8_t b) { return b == 0xCD; }));

      std::vector<uint8_t> buf(w * chunk, 0x5A);  // in place: only this rank's chunk is filled in
      std::copy(mine.begin(), mine.end(), buf.begin() + r * chunk);
      c.all_gather(buf.data() + r * chunk, buf.data(), count, t);
      EXPECT_EQ(buf, expected);
    }
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  for (DType t : kAllDtypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{999}, size_t{70001}}) {
      for (int root = 0; root < w; ++root) {
        const auto root_data = encode(random_values(case_seed(t, ReduceOp::kSum, n, 5), root, n, t), t);
        auto buf = r == root ? root_data : std::vector<uint8_t>(root_data.size(), 0x11);
        c.broadcast(buf.data(), n, t, root);
        EXPECT_EQ(buf, root_data) << dtype_name(t) << " n=" << n << " root=" << root;
      }
    }
  }
}

// Byte payloads: any length (odd ones too), from every root; all-gathered in and out of place; the
// traffic ledger counts their bytes as any collective's.
TEST_P(Collectives, BytePayloadsMoveAsBytes) {
  Communicator& c = *comm_;
  const int w = c.size(), r = c.rank();
  TrafficLedger ledger;
  c.set_traffic_ledger(&ledger);
  uint64_t want_broadcast = 0, want_gather = 0;
  for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{4099}, size_t{70001}}) {
    for (int root = 0; root < w; ++root) {
      std::vector<uint8_t> root_data(n);
      for (size_t i = 0; i < n; ++i) root_data[i] = static_cast<uint8_t>(i * 7 + root * 13 + 1);
      auto buf = r == root ? root_data : std::vector<uint8_t>(n, 0xAB);
      c.broadcast_bytes(buf.data(), n, root);
      EXPECT_EQ(buf, root_data) << "n=" << n << " root=" << root;
      want_broadcast += n;
    }
    std::vector<uint8_t> mine(n), all(n * static_cast<size_t>(w), 0), want;
    for (int k = 0; k < w; ++k)
      for (size_t i = 0; i < n; ++i) want.push_back(static_cast<uint8_t>(i * 3 + k * 101 + 5));
    for (size_t i = 0; i < n; ++i) mine[i] = static_cast<uint8_t>(i * 3 + r * 101 + 5);
    c.all_gather_bytes(mine.data(), all.data(), n);
    EXPECT_EQ(all, want) << "out of place, n=" << n;
    std::vector<uint8_t> in_place(n * static_cast<size_t>(w), 0);
    if (n > 0) std::memcpy(in_place.data() + static_cast<size_t>(r) * n, mine.data(), n);
    c.all_gather_bytes(in_place.data() + static_cast<size_t>(r) * n, in_place.data(), n);
    EXPECT_EQ(in_place, want) << "in place, n=" << n;
    want_gather += 2 * ring_bytes_sent(CollectiveKind::kAllGather, n * static_cast<size_t>(w), w);
  }
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kBroadcast), want_broadcast);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllGather), want_gather);
  c.set_traffic_ledger(&TrafficLedger::global());
}

TEST_P(Collectives, ZeroCountAcceptsNullBuffers) {
  Communicator& c = *comm_;
  for (DType t : kAllDtypes) {
    EXPECT_NO_THROW(c.all_reduce(nullptr, 0, t, ReduceOp::kAvg));
    EXPECT_NO_THROW(c.reduce_scatter(nullptr, nullptr, 0, t, ReduceOp::kSum));
    EXPECT_NO_THROW(c.all_gather(nullptr, nullptr, 0, t));
    EXPECT_NO_THROW(c.broadcast(nullptr, 0, t, c.size() - 1));
  }
  EXPECT_NO_THROW(c.barrier());
}

// Sums are deterministic: every element is the ranks' values added in fp32 in rank order and
// rounded once, whatever the collective and the message size. So the all-reduce of a whole buffer,
// reduce-scatters of its parts (in and out of place) and the plain computation agree to the bit:
// the property that makes ZeRO stage 0 (bucketed all-reduce) and stage 2 (per-unit reduce-scatter)
// train identically.
TEST_P(Collectives, SumsAreRankOrderedAndTheSameForEveryCollective) {
  Communicator& c = *comm_;
  const size_t w = static_cast<size_t>(c.size()), r = static_cast<size_t>(c.rank());
  for (DType t : kAllDtypes) {
    // Sizes of a few elements to past one staging piece (2^18 / W elements), not divisible by W.
    for (size_t chunk : {size_t{1}, size_t{5}, size_t{1000}, size_t{70001}, size_t{300007}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " chunk=" << chunk);
      const size_t n = chunk * w;
      const auto in = inputs_of_all_ranks(case_seed(t, ReduceOp::kSum, n, 9), static_cast<int>(w), n, t);
      // The expected bits: fp32 sum in rank order, one rounding.
      std::vector<float> acc(n, 0.f);
      for (size_t q = 0; q < w; ++q)
        for (size_t i = 0; i < n; ++i) acc[i] = q == 0 ? in[q][i] : acc[i] + in[q][i];
      const auto expected = encode(acc, t);
      const size_t es = dtype_size(t);

      auto all = encode(in[r], t);
      c.all_reduce(all.data(), n, t, ReduceOp::kSum);
      EXPECT_EQ(0, std::memcmp(all.data(), expected.data(), all.size())) << "all_reduce";

      const auto send = encode(in[r], t);
      std::vector<uint8_t> recv(chunk * es);
      c.reduce_scatter(send.data(), recv.data(), chunk, t, ReduceOp::kSum);
      EXPECT_EQ(0, std::memcmp(recv.data(), expected.data() + r * chunk * es, recv.size())) << "reduce_scatter";

      auto inplace = encode(in[r], t);
      c.reduce_scatter(inplace.data(), inplace.data() + r * chunk * es, chunk, t, ReduceOp::kSum);
      EXPECT_EQ(0, std::memcmp(inplace.data() + r * chunk * es, expected.data() + r * chunk * es, chunk * es))
          << "reduce_scatter in place";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Collectives, ::testing::Values(ProgressMode::kPoll, ProgressMode::kBlocking),
                         mode_name);

}  // namespace
}  // namespace zerodp::comm::testing
